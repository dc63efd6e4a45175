"""Writes that survive a crash: fsync a file's data or a folder's new entries, and replace a
file whole (a new file written beside it, fsynced, then renamed over it)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

_TEMP_SUFFIX = ".tmp"


def fsync(path: Path) -> None:
    """Flush `path` to disk: a file's contents, or a folder's entries (a rename into it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def _remove(path: Path) -> None:
    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(target: Path) -> list[Path]:
    """Temp files of replacements of `target` whose process is gone (killed before the
    rename); removed."""
    removed = []
    prefix = _temp_prefix(target)
    for path in target.parent.glob(f"{prefix}*{_TEMP_SUFFIX}"):
        pid = path.name[len(prefix) :].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            _remove(path)
            removed.append(path)
    return removed


def replace_whole(target: Path, write: Callable[[Path], None]) -> Path:
    """Replace `target` atomically by what `write(temp)` writes into a new hidden file beside
    it: a reader sees the old file or the new one, never a part (POSIX rename keeps an open
    old inode readable). A write that dies leaves `target` untouched and at most a temp file,
    which the next replacement removes. Returns `target`."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    temp = (
        target.parent / f"{_temp_prefix(target)}{os.getpid()}.{time.monotonic_ns()}{_TEMP_SUFFIX}"
    )
    try:
        write(temp)
        fsync(temp)
        os.replace(temp, target)
    except BaseException:
        _remove(temp)
        raise
    with contextlib.suppress(OSError):  # the entry is durable on most systems anyway
        fsync(target.parent)
    return target
