"""[analysis]: how `dgm analyze` audits and judges."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from dgm.config.problems import Problem
from dgm.contracts.sampling import KEEP_ALL

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(s|m|h|d)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> timedelta:
    """A positive duration as the config writes them ("90s", "30m", "1h", "7d", "1.5h");
    ValueError with what was expected otherwise."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or float(match[1]) <= 0:
        raise ValueError(
            f'expected a duration > 0 like "30s", "5m", "1h" (s, m, h or d), got {text!r}'
        )
    return timedelta(seconds=float(match[1]) * _UNIT_S[match[2]])


def audit_start(text: str) -> Literal["earliest", "latest"] | timedelta:
    """`analysis.start` read: "earliest", "latest" or a positive duration ("90s", "30m", "1h",
    "7d", "1.5h"); ValueError with what was expected otherwise."""
    value = text.strip().lower()
    if value in ("earliest", "latest"):
        return "earliest" if value == "earliest" else "latest"
    match = _DURATION.fullmatch(value)
    if match is None or float(match[1]) <= 0:
        raise ValueError(
            'expected "earliest", "latest" or a duration like "30m", "1h", "7d" '
            f"(s, m, h or d), got {text!r}"
        )
    return timedelta(seconds=float(match[1]) * _UNIT_S[match[2]])


@dataclass(frozen=True)
class AnalysisSettings:
    """How `dgm analyze` audits and judges (see docs/design.md's definitions)."""

    # Seconds between the starts of two analysis runs of `dgm analyze` without --once (a run
    # that takes longer is followed at once); > 0. A run takes ~10 s on the demo's state
    # (bench/README.md), so a duplicate is published within a few tens of seconds.
    interval_s: float = 10.0
    # Length of a metrics window in seconds (by the records' Kafka timestamps); >= 1.
    window_s: int = 60
    # A source record below the group's committed offset counts as lost only when it is older
    # than this and still has no sink copy: the sink write may simply not be visible yet.
    grace_s: float = 30.0
    # Fingerprints older than this many hours are compacted away; duplicate detection spans
    # the retention, not one batch. Collector samples are kept as long
    # (dgm.contracts.sample_upkeep).
    # > 0.
    retention_h: float = 168.0
    # Spark master URL; local[*] runs Spark inside dgm. `dgm analyze --master` overrides it.
    spark_master: str = "local[*]"
    # Fewer checked records than this gives the verdict "insufficient evidence". >= 1.
    min_records: int = 100
    # Consumer-group status (docs/design.md, "Consumer-group status") judges each partition
    # over its last this-many collector samples of the group's committed offset and lag from
    # the LSO (Burrow's sliding window: 10 samples at collectors.interval_s). >= 2.
    group_status_window: int = 10
    # Where the FIRST audit of a topic-partition (none audited yet) starts: "earliest" (the log
    # start offset), "latest" (the LSO sampled when dgm first sees the partition: only newer
    # records are audited), or a duration like "30m", "1h", "7d" (the first offset whose Kafka
    # timestamp is at most that old). Offsets before the start are recorded as before the
    # audit start: never audited later, never judged. Later audits always resume where the
    # previous one ended.
    start: str = "earliest"
    # The share of each cycle's newly audited offsets that is also read again from the
    # offsets already audited, to find logs truncated and rewritten (docs/design.md, "Log
    # integrity"); gathered until it makes 10,000 offsets. 0 reads again only around the
    # backwards moves the collectors record. 0 <= share <= 1.
    reread_share: float = 0.1
    # Every pipeline's id sample unless it sets its own: keep the fingerprints of 1 in this
    # many message ids (docs/design.md, "Sampled pipelines"); 1 keeps every id. >= 1.
    sample_one_in: int = KEEP_ALL

    def problems(self) -> Iterator[Problem]:
        for key in ("interval_s", "grace_s", "retention_h"):
            value = getattr(self, key)
            bound = ">= 0" if key == "grace_s" else "> 0"
            if not (math.isfinite(value) and (value >= 0 if bound == ">= 0" else value > 0)):
                yield key, f"expected a number {bound}, got {value!r}"
        if self.window_s < 1:
            yield "window_s", f"expected a whole number of seconds >= 1, got {self.window_s!r}"
        if self.min_records < 1:
            yield "min_records", f"expected a count >= 1, got {self.min_records!r}"
        if self.group_status_window < 2:
            yield (
                "group_status_window",
                f"expected a count of samples >= 2, got {self.group_status_window!r}",
            )
        if not self.spark_master.strip():
            yield "spark_master", "expected a Spark master URL like local[*], got ''"
        if not (math.isfinite(self.reread_share) and 0 <= self.reread_share <= 1):
            yield "reread_share", f"expected a share between 0 and 1, got {self.reread_share!r}"
        if self.sample_one_in < KEEP_ALL:
            yield "sample_one_in", f"expected 1 or more, got {self.sample_one_in}"
        try:
            audit_start(self.start)
        except ValueError as error:
            yield "start", str(error)
