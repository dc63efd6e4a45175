"""Size-bounded log files for child processes' output.

`RotatingFile` appends bytes to `<name>.log`; when the next write would take it past
`max_bytes`, the file becomes `<name>.log.1` (`.1` becomes `.2`, and so on; the oldest beyond
`backups` is deleted) and a new one starts: the names `logging.handlers.RotatingFileHandler`
gives, so log tools that know it know these. `copy` feeds one from a child's stdout pipe.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import BinaryIO

MAX_BYTES = 10 * 1024 * 1024
BACKUPS = 3
_CHUNK = 64 * 1024


class RotatingFile:
    """Thread-safe: the pipes of a child and of its restarted successor may write at once."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, backups: int = BACKUPS) -> None:
        if max_bytes < 1 or backups < 0:
            raise ValueError(f"max_bytes >= 1 and backups >= 0, got {max_bytes}, {backups}")
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None

    def backup(self, n: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{n}")

    def write(self, data: bytes) -> None:
        """Append `data`, flushed (a reader of the file sees it at once). A file is cut after
        its last whole line that fits; a line longer than `max_bytes` is split."""
        with self._lock:
            while data:
                file = self._current()
                size = file.tell()
                room = self.max_bytes - size
                if len(data) <= room:
                    file.write(data)
                    return
                cut = data.rfind(b"\n", 0, max(room, 0)) + 1
                if cut == 0 and size == 0:
                    cut = room
                if cut:
                    file.write(data[:cut])
                    data = data[cut:]
                self._rotate()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def _current(self) -> BinaryIO:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Unbuffered: every write reaches the file (`dgm run` reads its tail for status).
            self._file = self.path.open("ab", buffering=0)
        return self._file

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
            return
        self.backup(self.backups).unlink(missing_ok=True)
        for n in range(self.backups - 1, 0, -1):
            if self.backup(n).exists():
                self.backup(n).replace(self.backup(n + 1))
        if self.path.exists():
            self.path.replace(self.backup(1))


def copy(stream: BinaryIO, into: RotatingFile) -> None:
    """Everything `stream` (a child's stdout pipe) gives until its end, into the file; as it
    comes, not a line at a time (a progress line without a newline shows too)."""
    read = getattr(stream, "read1", stream.read)
    with stream:
        while chunk := read(_CHUNK):
            into.write(chunk)
