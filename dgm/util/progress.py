"""The audit's progress, as a small JSON file in the state directory the dashboard reads.

The audit (spark_jobs) writes it every few seconds while it reads Kafka; readers (the
dashboard) must not import Spark, so the format lives here. Each write replaces the file
atomically (temp file + rename), so a reader sees one whole state or the previous one.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

PROGRESS_FILE = "audit-progress.json"


@dataclass(frozen=True)
class AuditProgress:
    # "reading" (Kafka records being fingerprinted), "writing" (the batch being committed),
    # "done" (the last audit finished) or "failed".
    phase: str
    # Records fingerprinted so far, and the offsets (records plus control markers) read so
    # far of the ranges' offsets_total (0 when there is nothing to audit).
    records_done: int
    offsets_done: int
    offsets_total: int
    # Records audited per second so far in this audit; ETA in seconds, None when unknown.
    rate: float
    eta_s: float | None
    started_at: datetime
    updated_at: datetime

    def line(self) -> str:
        """The log line: records audited of the range, rate, ETA."""
        eta = "?" if self.eta_s is None else f"{self.eta_s:.0f}s"
        share = 100.0 * self.offsets_done / self.offsets_total if self.offsets_total else 100.0
        return (
            f"audit: {self.phase}: {self.records_done:,} records audited, "
            f"{self.offsets_done:,} of {self.offsets_total:,} offsets ({share:.0f}%), "
            f"{self.rate:,.0f} records/s, ETA {eta}"
        )


def progress_path(state_dir: Path) -> Path:
    return state_dir / PROGRESS_FILE


def write_progress(state_dir: Path, progress: AuditProgress) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    data = asdict(progress)
    data["started_at"] = progress.started_at.isoformat()
    data["updated_at"] = progress.updated_at.isoformat()
    handle, temporary = tempfile.mkstemp(prefix=f".{PROGRESS_FILE}.", dir=state_dir)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(data, out)
        os.replace(temporary, progress_path(state_dir))
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def read_progress(state_dir: Path) -> AuditProgress | None:
    """The latest progress written, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads(progress_path(state_dir).read_text())
        return AuditProgress(
            phase=str(data["phase"]),
            records_done=int(data["records_done"]),
            offsets_done=int(data["offsets_done"]),
            offsets_total=int(data["offsets_total"]),
            rate=float(data["rate"]),
            eta_s=None if data["eta_s"] is None else float(data["eta_s"]),
            started_at=datetime.fromisoformat(data["started_at"]),
            updated_at=datetime.fromisoformat(data["updated_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
