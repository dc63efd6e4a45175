"""Faults: the collectors' events attributed to pipelines, and those that weigh as evidence
(docs/design.md, "verdict")."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc

from dgm.clients.permissions import AUTHORIZATION_FAILED, AUTHORIZATION_RESTORED
from dgm.config.document import DgmConfig
from dgm.contracts import published as tables
from dgm.contracts.clusters import cluster_column
from dgm.contracts.registered_schemas import SCHEMA_LOOKUP_FAILED, SCHEMA_LOOKUP_RESTORED
from spark_jobs.analyze.publish import arrow_of

# Events that give a verdict weight: for the pipeline's group, for producers on its topics,
# and cluster-wide ones that count for every pipeline.
GROUP_FAULTS = ("rebalance", "member_joined", "member_left")
PRODUCER_FAULTS = ("epoch_bump",)
# A recreated topic, and a partition's offsets going back (a truncated log: collectors/events.py).
TOPIC_FAULTS = (
    "topic_recreated",
    "high_watermark_backwards",
    "log_start_backwards",
    "lso_backwards",
)
CLUSTER_FAULTS = ("outage_start", "broker_left")
# Not faults (they give no weight), but shown with the pipelines of their topic or group.
TOPIC_EVENTS = (
    *TOPIC_FAULTS,
    AUTHORIZATION_FAILED,
    AUTHORIZATION_RESTORED,
    SCHEMA_LOOKUP_FAILED,
    SCHEMA_LOOKUP_RESTORED,
)


def faults(config: DgmConfig, events: pa.Table, producers: pa.Table) -> pa.Table:
    """The events sample, one row per pipeline each event is attributed to: group events to
    the pipelines of the group, epoch bumps to the pipelines with the producer on one of their
    topics (producers sample), a recreated topic to the pipelines of the topic; null for the
    rest (cluster-wide or unmonitored). Each row names the cluster whose collector saw it
    (a named cluster's samples carry a qualified cluster_id, collectors.cluster_store)."""
    by_group: dict[str, list[str]] = defaultdict(list)
    by_topic: dict[str, list[str]] = defaultdict(list)
    for p in config.pipelines:
        if p.consumer_group:  # a deadline claim may name no group
            by_group[p.consumer_group].append(p.name)
        for topic in dict.fromkeys((*p.source_topics, *p.sink_topics)):
            by_topic[topic].append(p.name)
    bumped = {
        pid
        for event, pid in zip(
            events["event"].to_pylist(), events["producer_id"].to_pylist(), strict=True
        )
        if event in PRODUCER_FAULTS
    }
    # Only the producers an epoch bump names: the producers sample spans the retention.
    on_topics = producers.select(["producer_id", "topic"]).filter(
        pc.is_in(producers["producer_id"], pa.array(sorted(bumped), pa.int64()))
    )
    by_producer: dict[int, list[str]] = defaultdict(list)
    for row in on_topics.group_by(["producer_id", "topic"]).aggregate([]).to_pylist():
        for pipeline in by_topic.get(row["topic"], ()):
            if pipeline not in by_producer[row["producer_id"]]:
                by_producer[row["producer_id"]].append(pipeline)
    rows = []
    clusters = cluster_column(events["cluster_id"], config.clusters).to_pylist()
    for event, cluster in zip(events.select(["sampled_at", "event", "group_id", "producer_id",
                                             "topic", "detail"]).to_pylist(), clusters,
                              strict=True):  # fmt: skip
        # One row per pipeline attributed (a group several pipelines share gives one each).
        matches = dict.fromkeys([
            *by_group.get(event["group_id"], ()),
            *(by_producer.get(event["producer_id"], ()) if event["event"] in PRODUCER_FAULTS
              else ()),
            *(by_topic.get(event["topic"], ()) if event["event"] in TOPIC_EVENTS else ()),
        ])  # fmt: skip
        for pipeline in list(matches) or [None]:
            rows.append(
                {"at": event["sampled_at"], "event": event["event"], "group_id": event["group_id"]}
                | {"pipeline": pipeline, "detail": event["detail"], "cluster": cluster}
            )
    return arrow_of(rows, tables.FAULTS)
