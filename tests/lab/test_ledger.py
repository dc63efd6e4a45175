from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lab.ledger import LedgerEntry, LedgerError, LedgerWriter, read_ledger


def entry(event: str, mid: str, offset: int | None = None, **extra: object) -> LedgerEntry:
    return LedgerEntry(event, mid, "sess", 0, int(mid[1:]), offset, 1.5, **extra)  # type: ignore[arg-type]


ENTRIES = [
    entry("sent", "m0"),
    entry("sent", "m1"),
    entry("sent", "m2"),
    entry("sent", "m3"),
    entry("acked", "m0", 0),
    entry("aborted", "m1", 1),
    entry("failed", "m2", error="Local: Message timed out"),
    entry("acked", "m3", 7),
    entry("acked", "m3", 9),  # a second ack of the same id: the first copy is the acked one
]


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with LedgerWriter(path) as writer:
        for e in ENTRIES:
            writer.append(e)
    ledger = read_ledger(path)
    assert ledger.entries == tuple(ENTRIES)
    assert ledger.acked == {"m0": (0, 0), "m3": (0, 7)}
    assert ledger.aborted_ids == {"m1"}
    assert ledger.failed_ids == {"m2"}
    assert ledger.sent_ids == {"m0", "m1", "m2", "m3"}


def test_flush_makes_entries_visible_to_another_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.jsonl"
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    writer = LedgerWriter(path)
    writer.append(ENTRIES[0])
    writer.flush()
    assert synced, "flush must fsync"
    with path.open() as other:  # a separate handle, as a test or a restarted process would use
        assert json.loads(other.readline())["message_id"] == "m0"
    writer.close()


def test_torn_last_line_is_ignored_and_the_next_writer_starts_clean(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with LedgerWriter(path) as writer:
        writer.append(ENTRIES[0])
    line = json.dumps({"event": "acked", "message_id": "m9", "producer": "sess"})
    with path.open("a") as f:
        f.write(line[:25])  # the crash cut this entry short
    assert read_ledger(path).entries == (ENTRIES[0],)
    with LedgerWriter(path) as writer:
        writer.append(ENTRIES[1])
    assert read_ledger(path).entries == (ENTRIES[0], ENTRIES[1])


def test_torn_inside_a_multibyte_character(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with LedgerWriter(path) as writer:
        writer.append(ENTRIES[0])
    with path.open("ab") as f:
        f.write('{"event":"failed","error":"é'.encode()[:-1])
    assert read_ledger(path).entries == (ENTRIES[0],)


def test_complete_but_unterminated_last_line_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with LedgerWriter(path) as writer:
        writer.append(ENTRIES[0])
        writer.append(ENTRIES[4])
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    assert read_ledger(path).entries == (ENTRIES[0], ENTRIES[4])
    with LedgerWriter(path) as writer:
        writer.append(ENTRIES[1])
    assert read_ledger(path).entries == (ENTRIES[0], ENTRIES[4], ENTRIES[1])


def test_a_bad_line_before_the_end_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    with LedgerWriter(path) as writer:
        writer.append(ENTRIES[0])
    with path.open("a") as f:
        f.write('{"event": "delivered"}\n')
    with LedgerWriter(path) as writer:
        writer.append(ENTRIES[1])
    with pytest.raises(LedgerError, match=rf"{path}:2: .*event must be one of"):
        read_ledger(path)
