"""Topics the audit may not read: told apart from other failures, recorded as events.

Spark's Kafka source fails the whole read when one topic is refused (Kafka's
TopicAuthorizationException names the topics). The audit then records each as the collectors
record a refusal (an `authorization_failed` event, dgm.clients.permissions) and reads the others;
the refused topics' ranges stay unaudited, read again once the permission is granted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dgm.clients.permissions import AUTHORIZATION_FAILED, AUTHORIZATION_RESTORED, TOPIC_READ, Denial
from dgm.contracts.samples import SampleStore

_REFUSED_TOPICS = re.compile(r"Not authorized to access topics: \[([^\]]*)\]")


def refused_topics(error: BaseException) -> list[str]:
    """The topics a failed read was refused (TopicAuthorizationException), else []."""
    found = _REFUSED_TOPICS.search(str(error))
    if found is None:
        return []
    return sorted({t.strip() for t in found[1].split(",") if t.strip()})


def record_refusals(state_dir: Path, topics: Iterable[str]) -> list[Denial]:
    """An `authorization_failed` event for each refused topic whose newest authorization
    event is not already that (the collectors may have recorded it, or an earlier cycle).
    The Denials, for the caller's progress line."""
    store = SampleStore(state_dir)
    events = store.read("events")
    denials = [Denial(TOPIC_READ, topic) for topic in topics]
    newest: dict[str, str] = {}
    mine = events.filter(
        pc.is_in(events["event"], pa.array([AUTHORIZATION_FAILED, AUTHORIZATION_RESTORED]))
    )
    for row in mine.sort_by("sampled_at").select(["event", "detail"]).to_pylist():
        newest[row["detail"]] = row["event"]
    cluster = _cluster_id(store)
    now = datetime.now(UTC)
    rows = [
        {
            "sampled_at": now,
            "cluster_id": cluster,
            "event": AUTHORIZATION_FAILED,
            "detail": d.line(),
            "topic": d.name,
        }
        for d in denials
        if newest.get(d.line()) != AUTHORIZATION_FAILED
    ]
    if rows:
        store.write("events", rows)
    return denials


def _cluster_id(store: SampleStore) -> str:
    """The sampled cluster's id (the newest offsets sample's): events belong to a cluster."""
    latest = store.latest("offsets")
    if latest is None:
        return ""
    ids = store.read("offsets", [latest])["cluster_id"].to_pylist()
    return str(ids[0]) if ids else ""
