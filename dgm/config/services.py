"""[exporter], [dashboard] and [watch]: the serving stages' settings."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, get_args

from dgm.config.problems import Problem

Granularity = Literal["partition", "topic"]
GRANULARITIES: tuple[str, ...] = get_args(Granularity)


@dataclass(frozen=True)
class ExporterSettings:
    """What `dgm exporter` serves on /metrics."""

    # "partition": the per-topic series and, beside them, one series per partition (LSO lag
    # and stuck time per topic-partition, consumer lag per group and partition); "topic": the
    # per-topic series only, for clusters whose partitions would make too many series (as
    # KMinion's granularity).
    granularity: Granularity = "partition"


@dataclass(frozen=True)
class DashboardSettings:
    """[dashboard]: what the web dashboard may change."""

    # The Alerts page's form adds and deletes alert rules (in <state_dir>/alerts.sqlite) only
    # when true. Off by default: the dashboard has no login, so anyone who reaches its port
    # could change what alerts. Turn it on only where the dashboard binds loopback or sits
    # behind authentication (docs/operations.md, "The dashboard beyond loopback").
    allow_edits: bool = False


@dataclass(frozen=True)
class WatchSettings:
    """[watch]: the continuous reader of the sink topics (`dgm watch`; docs/design.md, "The
    watch"), which publishes the duplicates it sees within seconds."""

    # false: `dgm run` and `dgm demo` start no watch, and duplicates wait for the analysis.
    enabled: bool = True
    # Ids held to recognise a later copy, over every watched pipeline; past it the id seen
    # longest ago is forgotten (its later copies wait for the analysis). > 0.
    max_ids: int = 1_000_000
    # Records read back in every sink partition when the watch starts, so a copy of an id
    # written shortly before is recognised. >= 0.
    lookback: int = 10_000

    def problems(self) -> Iterator[Problem]:
        if self.max_ids < 1:
            yield "max_ids", f"expected 1 or more, got {self.max_ids}"
        if self.lookback < 0:
            yield "lookback", f"expected 0 or more, got {self.lookback}"
