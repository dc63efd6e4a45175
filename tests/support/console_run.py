"""Kafka's console consumer piped into its console producer (lab/console/), SIGKILLed twice
with the collectors sampling every second, once per test session: the lab's test of it reads
the run's report and topics (tests/lab/test_console_relay.py), the causes scenario judges it
(tests/scenarios/test_causes_without_headers.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dgm.config.loader import load_config
from lab.console.run import ConsoleLabReport, ConsoleLabSettings, run_console_lab
from tests.support.published_lab import collecting, offsets_samples, wait_for_cycles

MESSAGES, KILLS = 1500, 2
INTERVAL_S = 1.0


@dataclass(frozen=True)
class ConsoleRun:
    report: ConsoleLabReport
    config_path: Path  # its dgm.toml (state_dir, [analysis], [collectors]); no pipeline yet


def run_collected(kafka: Any, root: Path) -> ConsoleRun:
    """The run (MESSAGES records at 100 a second, KILLS SIGKILLs of the console consumer),
    sampled until two more samples show the topics' ends."""
    state_dir, config_path = root / "state", root / "dgm.toml"
    config_path.write_text(
        f'state_dir = "{state_dir}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\n\n'
        f"[collectors]\ninterval_s = {INTERVAL_S}\n"
    )
    settings = ConsoleLabSettings(
        kafka.bootstrap_servers, root / "lab", messages=MESSAGES, rate=100.0, kills=KILLS,
        seed=38, progress=lambda line: None,
    )  # fmt: skip
    with collecting(kafka.bootstrap_servers, load_config(config_path), INTERVAL_S):
        report = run_console_lab(settings)
        assert report.caught_up, f"not caught up; see {report.run_dir}"
        wait_for_cycles(state_dir, offsets_samples(state_dir) + 2)
    return ConsoleRun(report, config_path)
