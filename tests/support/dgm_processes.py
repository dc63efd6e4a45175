"""What the tests that start dgm's commands share: their environment, the processes a run
left, published verdicts."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb

from dgm.contracts.published import PUBLISHED_FILE

# A short-lived `dgm analyze` (or `dgm run`) on a test's little data: the C1 compiler alone
# starts its JVMs and runs their small jobs faster, as the lab's short-lived JVMs run.
QUICK_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def quick_jvm(env: dict[str, str]) -> dict[str, str]:
    """`env` with QUICK_JVM added to its JAVA_TOOL_OPTIONS (every JVM started reads them)."""
    return {**env, "JAVA_TOOL_OPTIONS": f"{env.get('JAVA_TOOL_OPTIONS', '')} {QUICK_JVM}".strip()}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without dgm's overrides (a developer's DGM_BOOTSTRAP must not leak)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DGM_")}
    return {**env, **extra}


def processes_of(marker: str) -> list[str]:
    """'pid: command' of every live process whose command line or environment holds `marker`
    (every process of a demo carries its state dir in DGM_STATE_DIR)."""
    found = []
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and (needle in cmdline or needle in environ):
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{entry.name}: {command[:160]}")
    return found


def published_verdicts(state_dir: Path) -> dict[str, dict[str, Any]]:
    """pipeline -> its verdict row, from the published DuckDB file (read-only); {} before."""
    path = state_dir / PUBLISHED_FILE
    if not path.exists():
        return {}
    try:
        with duckdb.connect(str(path), read_only=True) as db:
            cursor = db.execute("SELECT * FROM verdicts")
            names = [d[0] for d in cursor.description]
            return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}
    except duckdb.Error:
        return {}  # replaced while opening
