"""The stamped producer's durable record of the truth: what it sent and what the broker
acknowledged, as JSON lines fsync'd on flush, so tests compare what dgm says with what happened.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Literal, get_args

Event = Literal["sent", "acked", "failed", "aborted"]
EVENTS: frozenset[str] = frozenset(get_args(Event))


class LedgerError(ValueError):
    pass


@dataclass(frozen=True)
class LedgerEntry:
    # acked = delivered AND (non-transactional, or its transaction committed)
    event: Event
    message_id: str
    producer: str  # the dgm-producer session id
    partition: int
    seq: int  # dgm-seq
    offset: int | None  # the broker's offset, for acked and aborted
    at: float  # unix time
    error: str | None = None


class LedgerWriter:
    """Appends entries as JSON lines; `flush` makes them durable (os.fsync)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(path)
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def append(self, entry: LedgerEntry) -> None:
        self._file.write(json.dumps(asdict(entry), separators=(",", ":")) + "\n")

    def flush(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self.flush()
            self._file.close()

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True)
class Ledger:
    entries: tuple[LedgerEntry, ...]

    @property
    def acked(self) -> dict[str, tuple[int, int]]:
        """message_id -> (partition, offset) of its acknowledged copy (the first one)."""
        result: dict[str, tuple[int, int]] = {}
        for e in self.entries:
            if e.event == "acked" and e.offset is not None and e.message_id not in result:
                result[e.message_id] = (e.partition, e.offset)
        return result

    @property
    def aborted_ids(self) -> set[str]:
        return self._ids("aborted")

    @property
    def failed_ids(self) -> set[str]:
        return self._ids("failed")

    @property
    def sent_ids(self) -> set[str]:
        return self._ids("sent")

    def _ids(self, event: Event) -> set[str]:
        return {e.message_id for e in self.entries if e.event == event}


def read_ledger(path: Path) -> Ledger:
    """Every entry of the ledger at `path`. A torn last line (the producer crashed mid-write)
    is ignored; a bad line anywhere else is an error naming the file and line."""
    lines = path.read_bytes().split(b"\n")
    # Whatever follows the last newline may have been cut by a crash mid-write.
    complete, tail = lines[:-1], lines[-1]
    entries = [
        _parse(path, number, line.decode("utf-8", errors="replace"))
        for number, line in enumerate(complete, 1)
        if line
    ]
    if tail:
        # Torn: that entry was never made durable, so it never counted.
        with contextlib.suppress(LedgerError, UnicodeDecodeError):
            entries.append(_parse(path, len(lines), tail.decode("utf-8")))
    return Ledger(tuple(entries))


def _parse(path: Path, number: int, line: str) -> LedgerEntry:
    try:
        data = json.loads(line)
        if not isinstance(data, dict) or data.get("event") not in EVENTS:
            raise ValueError(f"event must be one of {sorted(EVENTS)}")
        return LedgerEntry(
            event=data["event"],
            message_id=str(data["message_id"]),
            producer=str(data["producer"]),
            partition=int(data["partition"]),
            seq=int(data["seq"]),
            offset=None if data.get("offset") is None else int(data["offset"]),
            at=float(data["at"]),
            error=None if data.get("error") is None else str(data["error"]),
        )
    except (ValueError, KeyError, TypeError) as error:
        raise LedgerError(
            f"{path}:{number}: not a ledger entry ({error}): {line[:200]!r}"
        ) from None


def _drop_torn_tail(path: Path) -> None:
    """Cut a partial last line left by a crash, so new entries start on a line of their own."""
    if not path.exists():
        return
    with path.open("rb+") as file:
        data = file.read()
        if not data or data.endswith(b"\n"):
            return
        start = data.rfind(b"\n") + 1
        try:
            _parse(path, 0, data[start:].decode("utf-8"))
            file.write(b"\n")  # complete but unterminated: keep it, as read_ledger does
        except (LedgerError, UnicodeDecodeError):
            file.truncate(start)
        file.flush()
        os.fsync(file.fileno())
