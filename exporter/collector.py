"""The prometheus_client Collector: one snapshot of the published analysis per scrape."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from exporter.families import FAMILIES, SCRAPE_DURATION, Family
from exporter.snapshot import DEFAULT_SETTINGS, ScrapeSettings, Snapshot, read_snapshot

Clock = Callable[[], datetime]


def _family(family: Family) -> GaugeMetricFamily:
    return GaugeMetricFamily(family.name, family.doc, labels=list(family.labels))


class PublishedCollector(Collector):
    """Reads `<state_dir>/dgm.duckdb` (and the newest sample's time) at every collect()."""

    def __init__(
        self,
        state_dir: Path,
        settings: ScrapeSettings = DEFAULT_SETTINGS,
        clock: Clock = lambda: datetime.now(UTC),
    ) -> None:
        self.state_dir = Path(state_dir)
        self.settings = settings
        self.clock = clock

    def describe(self) -> list[Metric]:
        # Lets the registry check names without reading the publication at registration.
        return [_family(family) for family in FAMILIES]

    def collect(self) -> Iterator[Metric]:
        began = time.perf_counter()
        snapshot = read_snapshot(self.state_dir, self.clock(), self.settings)
        snapshot.set(SCRAPE_DURATION, [], time.perf_counter() - began)
        yield from metrics(snapshot)


def metrics(snapshot: Snapshot) -> Iterator[Metric]:
    """Every declared family that has a series, in declaration order."""
    for family in FAMILIES:
        series = snapshot.series.get(family.name)
        if not series:
            continue
        metric = _family(family)
        for labels, value in series.items():
            metric.add_metric(list(labels), value)
        yield metric


def registry_for(state_dir: Path, settings: ScrapeSettings = DEFAULT_SETTINGS) -> CollectorRegistry:
    """A registry of the published analysis only (no process or Python metrics)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(PublishedCollector(state_dir, settings))
    return registry
