"""`dgm lab run` as a user runs it: a separate process, a report file, the config appended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dgm.config.loader import load_config
from lab.supervisor import child_env


def dgm(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`dgm --config <tmp>/dgm.toml ARGS` in a fresh process; the config starts empty."""
    config = tmp_path / "dgm.toml"
    if not config.exists():
        config.write_text("")
    env = {k: v for k, v in child_env().items() if k not in ("DGM_BOOTSTRAP", "DGM_STATE_DIR")}
    return subprocess.run(
        [sys.executable, "-m", "shell.cli", "--config", str(tmp_path / "dgm.toml"), *args],
        capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip


def test_lab_run_writes_the_report_and_adds_the_pipeline(kafka: Any, tmp_path: Path) -> None:
    report_path = tmp_path / "out" / "report.json"
    done = dgm(
        tmp_path, "lab", "run", "--pipeline", "cli-demo", "--mode", "at-least-once",
        "--messages", "300", "--rate", "50", "--crashes", "1", "--fault", "rebalance",
        "--bootstrap", kafka.bootstrap_servers, "--report", str(report_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(report_path)
    assert "crash 1: SIGKILL pid" in done.stderr and "caught up: yes" in done.stderr
    report = json.loads(report_path.read_text())
    assert report["pipeline"] == "cli-demo" and report["mode"] == "at-least-once"
    assert report["messages"]["sent"] == report["messages"]["acked"] == 300
    assert [c["returncode"] for c in report["crashes"]] == [-9]
    assert {f["kind"] for f in report["faults"]} == {"kill", "rebalance"}
    # Everything of the run lives under the config's state directory.
    assert Path(report["ledger_path"]).is_relative_to(tmp_path / ".dgm" / "lab")
    pipeline = load_config(tmp_path / "dgm.toml").pipeline("cli-demo")
    assert pipeline.source_topics == (report["source_topic"],)
    assert pipeline.sink_topics == (report["sink_topic"],)


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    done = dgm(tmp_path, "lab", "run", "--pipeline", "p", "--mode", "twice")
    assert done.returncode == 2 and "invalid choice: 'twice'" in done.stderr
    done = dgm(
        tmp_path, "lab", "run", "--pipeline", "p", "--mode", "at-least-once",
        "--fault", "broker-restart", "--bootstrap", "127.0.0.1:9",
    )  # fmt: skip
    assert done.returncode == 2
    assert "dgm: error: --fault broker-restart needs dgm's embedded cluster" in done.stderr
    assert "Traceback" not in done.stderr


def test_without_a_cluster_it_says_how_to_get_one(tmp_path: Path) -> None:
    done = dgm(tmp_path, "lab", "run", "--pipeline", "p", "--mode", "exactly-once")
    assert done.returncode == 2
    assert "dgm broker start" in done.stderr and "Traceback" not in done.stderr
    assert (tmp_path / "dgm.toml").read_text() == ""
    assert sorted(os.listdir(tmp_path)) == ["dgm.toml"]
