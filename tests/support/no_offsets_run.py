"""The lab's processor that commits no offsets (lab/no_offsets.py), SIGKILLed three times with
the collectors sampling every second, once per test session: the lab's test of it reads the
run's topics, the deadline scenario judges it (tests/scenarios/test_no_offsets_deadline.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from dgm.config.loader import load_config
from dgm.util.waiting import wait_until
from lab.no_offsets import NoOffsetsReport, NoOffsetsSettings, run_no_offsets
from tests.support.published_lab import collecting, offsets_samples, wait_for_cycles

MESSAGES = 1500
MAX_DELAY = timedelta(seconds=4)  # the deadline the scenario judges it by


@dataclass(frozen=True)
class NoOffsetsRun:
    report: NoOffsetsReport
    state_dir: Path  # the collectors' samples of the run
    config_path: Path  # its dgm.toml (state_dir, [analysis]); no pipeline yet


def run_collected(kafka: Any, root: Path) -> NoOffsetsRun:
    """The run (MESSAGES records, seed 27), sampled until every record is older than
    MAX_DELAY and two more samples show the topics' ends."""
    state_dir, config_path = root / "state", root / "dgm.toml"
    config_path.write_text(
        f'state_dir = "{state_dir}"\n\n[analysis]\ngrace_s = 0\nwindow_s = 60\nmin_records = 1\n'
    )
    settings = NoOffsetsSettings(
        kafka.bootstrap_servers, root / "lab", messages=MESSAGES, seed=27,
        progress=lambda line: None,
    )  # fmt: skip
    with collecting(kafka.bootstrap_servers, load_config(config_path), interval_s=1.0):
        report = run_no_offsets(settings)
        # The analysis judges as of its newest sample: two must come once every record is
        # older than max_delay, or the last ones are still pending.
        settled = report.finished_at + MAX_DELAY.total_seconds()
        wait_until(lambda: time.time() > settled, 60, "every record older than max_delay")
        wait_for_cycles(state_dir, offsets_samples(state_dir) + 2)
    return NoOffsetsRun(report, state_dir, config_path)
