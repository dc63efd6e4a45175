"""Collectors of several clusters in one process (docs/design.md, "Several clusters").

Each cluster has its own clients, Collector and Runner, in a thread of its own, so each has
its own outage backoff and its own first-contact check: a cluster that is down, or that
refuses dgm's settings, never stops the others from being sampled. Its failure is reported
with the cluster's name once the others are done.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.clients import Clients
from collectors.cluster_store import ClusterSampleStore
from collectors.cycle import Collector
from collectors.runner import CannotCollect, Runner
from dgm.config.collectors import CollectorSettings
from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.contracts.samples import SampleStore

log = logging.getLogger(__name__)


@dataclass
class ClusterCollectors:
    """Every cluster's clients and runner; `close` closes the clients."""

    runners: dict[str, Runner] = field(default_factory=dict)
    clients: dict[str, Clients] = field(default_factory=dict)

    def close(self) -> None:
        for clients in self.clients.values():
            clients.close()


def cluster_collectors(
    client_configs: Mapping[str, Mapping[str, Any]],
    settings: CollectorSettings,
    state_dir: Path,
    stop: threading.Event,
    request_timeout_s: float = 10.0,
    connect_timeout_s: float = 30.0,
    report: Callable[[str, str], None] = lambda cluster, line: print(line),
    upkeep: Callable[[], None] | None = None,
    expected: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
) -> ClusterCollectors:
    """A Runner per cluster (cluster name -> its librdkafka settings), all writing into the
    sample store of `state_dir`: the default cluster's rows as they are, another's with
    qualified names (collectors.cluster_store). `upkeep` runs in the first runner only (one
    store); `report` gets (cluster, summary line); `expected`: per cluster, the pipelines'
    topics and groups as it names them, asked for by name (collectors.cycle.Collector)."""
    store = SampleStore(state_dir)
    sampled_before = store.newest_time("offsets") is not None
    found = ClusterCollectors()
    for name, client_config in client_configs.items():
        clients = Clients(dict(client_config), request_timeout_s)
        found.clients[name] = clients
        collector = Collector(
            clients,
            settings,
            store if name == DEFAULT_CLUSTER else ClusterSampleStore(state_dir, name),
            request_timeout_s,
            sample_writers=len(client_configs),
            expected_topics=(expected or {}).get(name, ((), ()))[0],
            expected_groups=(expected or {}).get(name, ((), ()))[1],
            cluster_name=name,
        )
        found.runners[name] = Runner(
            collector,
            settings.interval_s,
            stop,
            connect_timeout_s,
            functools.partial(report, name),
            upkeep=upkeep if len(found.runners) == 0 else None,
            sampled_before=sampled_before,
        )
    return found


def _failed(failures: Mapping[str, BaseException]) -> CannotCollect:
    lines = "; ".join(f"cluster {name}: {error}" for name, error in failures.items())
    return CannotCollect(lines)


def run_each_once(runners: Mapping[str, Runner]) -> None:
    """One cycle of every cluster, one after the other; CannotCollect naming every cluster
    that could not be sampled, after the others were."""
    failures: dict[str, BaseException] = {}
    for name, runner in runners.items():
        try:
            runner.run_once()
        except CannotCollect as error:
            failures[name] = error
    if failures:
        raise _failed(failures)


def run_each_forever(runners: Mapping[str, Runner], stop: threading.Event) -> None:
    """Every cluster's loop in its own thread until `stop`. A cluster whose loop gives up
    (CannotCollect: never reachable at start, or its settings refused) is logged at once and
    the others go on; CannotCollect naming the clusters that gave up once all loops ended."""
    failures: dict[str, BaseException] = {}

    def loop(name: str, runner: Runner) -> None:
        try:
            runner.run_forever()
        except KeyboardInterrupt:  # asked to stop while waiting for the first contact
            pass
        except CannotCollect as error:
            failures[name] = error
            log.error("cluster %s is not sampled: %s", name, error)

    threads = [
        threading.Thread(target=loop, args=(name, runner), name=f"collector-{name}", daemon=True)
        for name, runner in runners.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():  # short joins: the main thread keeps handling signals
            thread.join(0.5)
    if failures:
        raise _failed(failures)
