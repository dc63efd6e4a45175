"""Start, find and stop the JVM processes of the embedded broker without touching others."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_PR_SET_PDEATHSIG = 1
# PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process: a
# broker restarted from a short-lived thread (a fault schedule) was SIGKILLed when that
# thread returned. Children that must die with the process are forked from this one thread,
# which lives as long as the process.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dgm-spawner")


def _die_with_parent() -> None:
    # A broker owned by a test session must not outlive it, even when pytest is SIGKILLed.
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(
    command: Sequence[str], log_path: Path, *, die_with_parent: bool, cwd: Path | None = None
) -> subprocess.Popen[bytes]:
    if die_with_parent:
        return _SPAWNER.submit(_popen, command, log_path, True, cwd).result()
    return _popen(command, log_path, False, cwd)


def _popen(
    command: Sequence[str], log_path: Path, die_with_parent: bool, cwd: Path | None
) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,  # Ctrl-C in the starting terminal must not reach the broker
            preexec_fn=_die_with_parent if die_with_parent else None,
        )


def find_pids(marker: str) -> list[int]:
    """Every live process whose command line contains `marker`, whoever started it."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and is_alive(int(entry.name), marker):
            found.append(int(entry.name))
    return sorted(found)


def is_alive(pid: int, marker: str) -> bool:
    """True if `pid` runs and its command line contains `marker` (guards against reused pids)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    if marker not in cmdline:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def reap(pid: int) -> None:
    """Collect an exited child of ours so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def terminate(pids: Sequence[int], marker: str, timeout: float) -> list[int]:
    """SIGTERM (a clean shutdown), then SIGKILL what is left after `timeout`; returns the killed."""
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in pids:
            reap(pid)
        if not any(is_alive(pid, marker) for pid in pids):
            return []
        time.sleep(0.1)
    stubborn = [pid for pid in pids if is_alive(pid, marker)]
    for pid in stubborn:
        _signal(pid, signal.SIGKILL)
    for pid in stubborn:
        wait_gone(pid, marker, 10)
    return stubborn


def kill(pid: int, marker: str) -> None:
    _signal(pid, signal.SIGKILL)
    wait_gone(pid, marker, 10)


def wait_gone(pid: int, marker: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while is_alive(pid, marker) and time.monotonic() < deadline:
        reap(pid)
        time.sleep(0.05)
    reap(pid)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
