"""The one-line status `dgm run` and `dgm demo` print: how fresh the samples and the analysis
are, and how many pipelines meet or violate what they declare (read-only from dgm.duckdb)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from dgm.contracts.published import PUBLISHED_FILE, open_read_only
from dgm.contracts.samples import SampleStore
from dgm.contracts.watched import read_watch


@dataclass(frozen=True)
class Status:
    sample_age_s: float | None  # None: no sample yet
    analysis_age_s: float | None  # None: nothing published yet
    meeting: int = 0
    violating: int = 0
    undecided: int = 0  # insufficient evidence so far

    def line(self, waiting_for_analysis: str = "") -> str:
        samples = _ago(self.sample_age_s)
        if self.analysis_age_s is None:
            analysis = "none yet" + (f" ({waiting_for_analysis})" if waiting_for_analysis else "")
            return f"status: last sample {samples}; analysis: {analysis}"
        return (
            f"status: last sample {_ago(self.sample_age_s)}; last analysis "
            f"{self.analysis_age_s:.0f}s ago; pipelines: {self.meeting} meeting, "
            f"{self.violating} violating, {self.undecided} undecided"
        )


def _ago(age: float | None) -> str:
    return "none yet" if age is None else f"{age:.0f}s ago"


def last_sample_age(state_dir: Path, now: float | None = None) -> float | None:
    """Seconds since the newest offsets sample; None before the first."""
    newest = SampleStore(state_dir).newest_time("offsets")
    return None if newest is None else max(0.0, (now or time.time()) - newest.timestamp())


def watch_age(state_dir: Path, now: float | None = None) -> float | None:
    """Seconds since the watch last wrote its file (it does every few seconds); None when
    there is none or it cannot be read."""
    found = read_watch(state_dir)
    if found is None:
        return None
    return max(0.0, (now or time.time()) - found[1].published_at.timestamp())


def published(state_dir: Path) -> tuple[datetime | None, list[tuple[str, str, bool | None]]]:
    """(when the last analysis finished, [(pipeline, achieved, meets_declared)]); (None, [])
    before the first publication. Read-only: never blocks the analysis's next publish."""
    path = state_dir / PUBLISHED_FILE
    if not path.exists():
        return None, []
    try:
        with open_read_only(path) as db:
            finished = db.execute("SELECT max(finished_at) FROM runs").fetchone()
            rows = db.execute(
                "SELECT pipeline, achieved, meets_declared FROM verdicts ORDER BY pipeline"
            ).fetchall()
    except (duckdb.Error, OSError):
        return None, []  # replaced while opening: the next look succeeds
    return (finished[0] if finished else None), [(r[0], r[1], r[2]) for r in rows]


def read_status(state_dir: Path) -> Status:
    now = time.time()
    finished, rows = published(state_dir)
    analysis_age = None
    if finished is not None:
        analysis_age = max(0.0, now - finished.astimezone(UTC).timestamp())
    return Status(
        last_sample_age(state_dir, now),
        analysis_age,
        meeting=sum(1 for _, _, meets in rows if meets is True),
        violating=sum(1 for _, _, meets in rows if meets is False),
        undecided=sum(1 for _, _, meets in rows if meets is None),
    )


def last_line(log: Path, prefix: str = "", limit: int = 16384) -> str:
    """The last line of a log file that starts with `prefix` (what a service last said)."""
    try:
        with log.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            lines = f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    for line in reversed(lines):
        if line.strip() and line.startswith(prefix) and not line.startswith("---"):
            return line.strip()[:120]
    return ""
