"""The watch's loop: read the sink topics, tell each duplicate, publish within a second.

Which topics: the sink topics of every pipeline that keeps every id (a sampled pipeline's
duplicates are the analysis's to find, among its kept ids). External sinks are not read here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from confluent_kafka import Message

from dgm.clients.schema_registry import RegistrySchemas
from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule
from dgm.contracts.clusters import split
from dgm.contracts.headers import PRODUCER, SEQ, SRC
from dgm.contracts.sampling import KEEP_ALL
from dgm.contracts.watched import WatchStatus
from watch.ids import Headers, header_text, message_id, seq_number
from watch.publish import publish, published_seen
from watch.reader import SinkReader
from watch.registry_ids import RegistryIds
from watch.seen import Copy, Duplicate, SeenIds

log = logging.getLogger("dgm.watch")

PUBLISH_GAP_S = 0.5  # at most two files a second while duplicates keep coming (~3 ms each)
STATUS_EVERY_S = 5.0  # the status row's age says the watch is alive
REFRESH_EVERY_S = 30.0  # new partitions and topics that appeared
READ_TIMEOUT_S = 0.25
KEEP_ROWS = 10_000  # the newest seen duplicates published; the analysis keeps them all


@dataclass(frozen=True)
class Watched:
    """A sink topic of a pipeline, and the rule that finds its ids."""

    pipeline: str
    topic: str  # as dgm names it (qualified off the default cluster)
    rule: MessageIdRule


def watched_topics(config: DgmConfig) -> dict[str, dict[str, list[Watched]]]:
    """cluster -> Kafka topic name -> what to tell for its records."""
    routes: dict[str, dict[str, list[Watched]]] = {}
    for pipeline in config.pipelines:
        if config.one_in(pipeline) != KEEP_ALL:
            continue
        for topic in pipeline.sink_topics:
            cluster, name = split(topic, config.clusters)
            watched = Watched(pipeline.name, topic, pipeline.sink_id_rule())
            routes.setdefault(cluster, {}).setdefault(name, []).append(watched)
    return routes


def registries(config: DgmConfig, clusters: Sequence[str]) -> dict[str, RegistryIds]:
    """The schema registry of each watched cluster that has one ([cluster.schema_registry])."""
    found = {}
    for cluster in clusters:
        registry = config.cluster_config(cluster).schema_registry
        if registry is not None:
            found[cluster] = RegistryIds(RegistrySchemas(registry))
    return found


def _headers(message: Message) -> Headers:
    # A consumed record's headers are (name, bytes or None) pairs in their order.
    return cast(Headers, message.headers())


def _when(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def seen_row(
    watched: Watched, cluster: str, found: str, duplicate: Duplicate, message: Message
) -> dict[str, Any]:
    """The SEEN_DUPLICATES row of `duplicate`; the header columns come from `message` when
    it is the extra copy (null when the extra copy is one read before)."""
    extra, first = duplicate.extra, duplicate.first
    headers = _headers(message)
    is_message = (extra.partition, extra.offset) == (message.partition(), message.offset())
    key = message.key()
    return {
        "pipeline": watched.pipeline,
        "topic": watched.topic,
        "message_id": found,
        "partition": extra.partition,
        "offset": extra.offset,
        "timestamp": _when(extra.timestamp_ms),
        "first_partition": first.partition,
        "first_offset": first.offset,
        "first_timestamp": _when(first.timestamp_ms),
        "key": key.decode("utf-8", "replace") if is_message and key is not None else None,
        "producer": header_text(headers, PRODUCER) if is_message else None,
        "seq": seq_number(header_text(headers, SEQ)) if is_message else None,
        "lineage": header_text(headers, SRC) if is_message else None,
        "seen_at": datetime.now(UTC),
        "cluster": cluster,
    }


class Watch:
    """The state of one `dgm watch`: readers, the ids held and the rows published."""

    def __init__(
        self,
        state_dir: Path,
        readers: Mapping[str, SinkReader],
        routes: Mapping[str, Mapping[str, Sequence[Watched]]],
        max_ids: int,
        keep: timedelta,
        registries: Mapping[str, RegistryIds] | None = None,
    ) -> None:
        self.state_dir = state_dir
        # Per cluster: the schema registry that registry_field rules decode with.
        self.registries = registries or {}
        self.readers = readers
        self.routes = routes
        self.seen = SeenIds(max_ids)
        self.keep = keep
        self.started_at = datetime.now(UTC)
        self.records_read = 0
        self.pipelines = {w.pipeline for t in routes.values() for ws in t.values() for w in ws}
        self.rows: dict[tuple[str, str, int, int], dict[str, Any]] = {}
        for row in published_seen(state_dir):
            self._add(row)

    def _add(self, row: dict[str, Any]) -> bool:
        key = (row["pipeline"], row["topic"], row["partition"], row["offset"])
        if key in self.rows:
            return False
        self.rows[key] = row
        return True

    def tell(self, cluster: str, message: Message) -> bool:
        """Note one committed record; whether it made a new seen duplicate."""
        self.records_read += 1
        new = False
        for watched in self.routes[cluster].get(message.topic() or "", ()):
            found = message_id(
                watched.rule,
                message.key(),
                message.value(),
                _headers(message),
                self.registries.get(cluster),
            )
            if found is None:  # unidentified: the analysis counts it
                continue
            _, stamp = message.timestamp()
            copy = Copy(stamp, message.partition() or 0, message.offset() or 0)
            duplicate = self.seen.see(watched.pipeline, watched.topic, found, copy)
            if duplicate is not None:
                new |= self._add(seen_row(watched, cluster, found, duplicate, message))
        return new

    def read_once(self) -> bool:
        """Read what arrived on every cluster; whether a new duplicate was seen."""
        new = False
        for cluster, reader in self.readers.items():
            for message in reader.read(READ_TIMEOUT_S / len(self.readers)):
                new |= self.tell(cluster, message)
        return new

    def publish(self) -> None:
        oldest = datetime.now(UTC) - self.keep
        kept = sorted(
            (r for r in self.rows.values() if r["seen_at"] >= oldest),
            key=lambda r: r["seen_at"],
        )[-KEEP_ROWS:]
        self.rows = {(r["pipeline"], r["topic"], r["partition"], r["offset"]): r for r in kept}
        status = WatchStatus(
            started_at=self.started_at,
            published_at=datetime.now(UTC),
            pipelines=len(self.pipelines),
            partitions=sum(len(r.assigned) for r in self.readers.values()),
            records_read=self.records_read,
            records_behind=sum(r.behind() for r in self.readers.values()),
            ids_held=len(self.seen),
        )
        publish(self.state_dir, kept, status)

    def run(self, stop: threading.Event, say: Callable[[str], None] = log.info) -> None:
        """Until `stop`: read, publish a new duplicate within PUBLISH_GAP_S, the status every
        STATUS_EVERY_S, and look for new partitions every REFRESH_EVERY_S."""
        refreshed = published = said = float("-inf")
        pending = True
        while not stop.is_set():
            now = time.monotonic()
            if now - refreshed >= REFRESH_EVERY_S:
                for reader in self.readers.values():
                    reader.refresh()
                refreshed = now
            pending |= self.read_once()
            now = time.monotonic()
            if (pending and now - published >= PUBLISH_GAP_S) or now - published >= STATUS_EVERY_S:
                self.publish()
                published, pending = now, False
            if now - said >= 60.0:
                say(
                    f"watch: {self.records_read} records read, {len(self.rows)} duplicates "
                    f"seen, {len(self.seen)} ids held"
                )
                for cluster, registry in sorted(self.registries.items()):
                    if registry.failures:
                        failed = ", ".join(f"{n} {why}" for why, n in registry.failures.items())
                        say(f"watch: schema lookups failed on cluster {cluster}: {failed}")
                said = now
        self.publish()
