"""Audit progress while it reads: a line at least every `every_s` seconds, and the core's
progress file (dgm.util.progress) for the dashboard.

The audit reads its ranges in chunks (ranges.split_ranges) and reports each chunk's records
and offsets once it is written and counted (audit/scratch.py), so the figures are exact at
chunk boundaries; a
ticker thread logs the latest figures, the rate and the ETA on a fixed period even while one
chunk, or the batch write, takes longer than the period.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from dgm.util.progress import AuditProgress, write_progress

Progress = Callable[[str], None]
EVERY_S = 10.0


class AuditTracker:
    def __init__(
        self, state_dir: Path, offsets_total: int, log: Progress, every_s: float = EVERY_S
    ) -> None:
        self.state_dir = state_dir
        self.offsets_total = offsets_total
        self.log = log
        self.every_s = every_s
        self.phase = "reading"
        self.records = self.offsets = 0
        self.started_at = datetime.now(UTC)
        self._began = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="dgm-audit-progress", daemon=True)

    def __enter__(self) -> AuditTracker:
        self.report(log=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            self.phase = "failed" if kind is not None else "done"
        self.report(log=False)

    def add(self, records: int, offsets: int) -> None:
        with self._lock:
            self.records += records
            self.offsets += offsets
        self.report(log=False)

    def set_phase(self, phase: str) -> None:
        with self._lock:
            self.phase = phase
        self.report(log=False)

    def snapshot(self) -> AuditProgress:
        with self._lock:
            elapsed = max(time.monotonic() - self._began, 1e-6)
            rate = self.records / elapsed
            offset_rate = self.offsets / elapsed
            left = self.offsets_total - self.offsets
            eta = None if offset_rate <= 0 else left / offset_rate
            if self.phase in ("done", "failed") or left <= 0:
                eta = 0.0 if self.phase != "failed" else None
            return AuditProgress(
                self.phase,
                self.records,
                self.offsets,
                self.offsets_total,
                rate,
                eta,
                self.started_at,
                datetime.now(UTC),
            )

    def report(self, log: bool) -> None:
        progress = self.snapshot()
        with contextlib.suppress(OSError):  # the dashboard's view only: never fail an audit
            write_progress(self.state_dir, progress)
        if log:
            self.log(progress.line())

    def _tick(self) -> None:
        while not self._stop.wait(self.every_s):
            self.report(log=True)
