"""Writes that survive a crash: fsync a file's data, or a folder's new entries."""

from __future__ import annotations

import os
from pathlib import Path


def fsync(path: Path) -> None:
    """Flush `path` to disk: a file's contents, or a folder's entries (a rename into it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
