"""`dgm collect` as a real process: its dgm.toml, its command line and environment (this
tree's code), the process for a block, and the events it sampled."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dgm.contracts.samples import SampleStore

ROOT = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, bootstrap: str, extra: str = "") -> Path:
    config = tmp_path / "dgm.toml"
    config.write_text(
        f'state_dir = "state"\n{extra}\n[cluster]\nbootstrap_servers = "{bootstrap}"\n',
        encoding="utf-8",
    )
    return config


def dgm_command(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "shell.cli", "--config", str(config), "collect", *args]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DGM_BOOTSTRAP", "DGM_STATE_DIR")}
    env["PYTHONPATH"] = str(ROOT)
    return env


@contextmanager
def collect_process(
    config: Path, stderr: Path, *args: str, stdout: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`dgm collect ARGS` as a real process for the block (stderr to a file); killed at the
    end if the block did not stop it."""
    with stderr.open("w") as err, (stdout or Path(os.devnull)).open("w") as out:
        collector = subprocess.Popen(
            dgm_command(config, *args), stdout=out, stderr=err, cwd=ROOT, env=environment()
        )
    try:
        yield collector
    finally:
        if collector.poll() is None:
            collector.kill()
            collector.wait()


def events(store: SampleStore) -> list[str]:
    return [str(e) for e in store.read("events").column("event").to_pylist()]
