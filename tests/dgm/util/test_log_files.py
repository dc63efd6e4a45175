"""dgm.util.log_files: a log file rotated at its bound, whole lines kept whole, the oldest files
dropped beyond the backups, concurrent writers' lines never interleaved."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dgm.util.log_files import RotatingFile


def lines(n: int, start: int = 0) -> bytes:
    return b"".join(f"line {i:05d}\n".encode() for i in range(start, start + n))  # 11 bytes


def kept(log: RotatingFile) -> list[Path]:
    """The files, oldest first."""
    backups = [log.backup(n) for n in range(log.backups, 0, -1)]
    return [p for p in (*backups, log.path) if p.exists()]


def test_rotates_at_the_bound_and_keeps_the_newest(tmp_path: Path) -> None:
    log = RotatingFile(tmp_path / "analysis.log", max_bytes=100, backups=2)
    for i in range(0, 100, 7):
        log.write(lines(7, i))  # 77 bytes at a time: every write crosses a bound
    log.close()
    files = kept(log)
    assert [p.name for p in files] == ["analysis.log.2", "analysis.log.1", "analysis.log"]
    assert all(0 < p.stat().st_size <= 100 for p in files)
    text = b"".join(p.read_bytes() for p in files)
    assert text.endswith(b"line 00104\n")  # the last line written (15 writes of 7)
    numbers = [int(line.split()[1]) for line in text.splitlines()]
    assert numbers == list(range(numbers[0], 105)) and numbers[0] > 0  # oldest dropped
    assert all(p.read_bytes().endswith(b"\n") for p in files)  # cut between lines


def test_a_line_longer_than_the_bound_is_split(tmp_path: Path) -> None:
    log = RotatingFile(tmp_path / "x.log", max_bytes=10, backups=5)
    log.write(b"a" * 25 + b"\n")
    log.close()
    assert [p.read_bytes() for p in kept(log)] == [b"a" * 10, b"a" * 10, b"a" * 5 + b"\n"]


def test_no_backups_starts_afresh(tmp_path: Path) -> None:
    log = RotatingFile(tmp_path / "x.log", max_bytes=22, backups=0)
    log.write(lines(3))
    log.close()
    assert [p.name for p in tmp_path.iterdir()] == ["x.log"]
    assert log.path.read_bytes() == b"line 00002\n"


def test_appends_to_an_existing_file_and_counts_it(tmp_path: Path) -> None:
    (tmp_path / "x.log").write_bytes(lines(8))  # 88 bytes from a run before
    log = RotatingFile(tmp_path / "x.log", max_bytes=100, backups=1)
    log.write(lines(2, 8))
    log.close()
    assert log.backup(1).read_bytes() == lines(9)
    assert log.path.read_bytes() == lines(1, 9)


def test_concurrent_writers_lines_stay_whole(tmp_path: Path) -> None:
    log = RotatingFile(tmp_path / "x.log", max_bytes=1000, backups=1000)

    def writes(writer: int) -> None:
        for i in range(500):
            log.write(f"{writer}:{i:04d}\n".encode())

    writers = [threading.Thread(target=writes, args=(w,)) for w in range(4)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    log.close()
    written = [line for p in kept(log) for line in p.read_text().splitlines()]
    assert sorted(written) == sorted(f"{w}:{i:04d}" for w in range(4) for i in range(500))


@pytest.mark.parametrize(("max_bytes", "backups"), [(0, 1), (10, -1)])
def test_bounds_must_make_sense(tmp_path: Path, max_bytes: int, backups: int) -> None:
    with pytest.raises(ValueError):
        RotatingFile(tmp_path / "x.log", max_bytes, backups)
