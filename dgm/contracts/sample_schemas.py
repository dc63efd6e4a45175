"""One Arrow schema per sample kind: the contract between the collectors and the Spark jobs.

Each column is documented where it is declared; the text also travels in the Parquet file as
field metadata ("doc"), so a reader of the files sees it too. Every row starts with
`sampled_at` and `cluster_id`. Offsets are Kafka offsets (int64); a null means "not known".
"""

from __future__ import annotations

import pyarrow as pa

TIMESTAMP = pa.timestamp("ms", tz="UTC")
PARTITION = pa.struct([pa.field("topic", pa.string()), pa.field("partition", pa.int32())])


def _column(name: str, kind: pa.DataType, doc: str, nullable: bool = False) -> pa.Field:
    return pa.field(name, kind, nullable=nullable, metadata={"doc": doc})


def _schema(*columns: pa.Field) -> pa.Schema:
    return pa.schema([*COMMON, *columns])


COMMON = (
    _column("sampled_at", TIMESTAMP, "when the collector took the sample (UTC)"),
    _column("cluster_id", pa.string(), "the Kafka cluster id the sample came from"),
)

OFFSETS = _schema(
    _column("topic", pa.string(), "topic name"),
    _column("partition", pa.int32(), "partition number"),
    _column("leader", pa.int32(), "broker id leading the partition; null if none", True),
    _column("log_start_offset", pa.int64(), "first offset still in the log (earliest)"),
    _column("high_watermark", pa.int64(), "latest offset, read_uncommitted: end of the log"),
    _column("lso", pa.int64(), "last stable offset: latest offset, read_committed"),
    _column("lso_lag", pa.int64(), "high_watermark - lso: records and markers past the LSO"),
    _column("lso_since", TIMESTAMP, "first sample at which the LSO had its current value"),
    _column(
        "lso_stuck_ms",
        pa.int64(),
        "how long the LSO has not moved while records sit above it (lso < high_watermark): "
        "sampled_at - lso_since; 0 when lso == high_watermark",
    ),
    _column(
        "topic_id",
        pa.string(),
        "Kafka's topic id (KIP-516): a topic deleted and recreated under the same name gets "
        "a new one; null if unknown (samples of older dgm versions)",
        True,
    ),
    _column(
        "leader_epoch",
        pa.int32(),
        "the leader epoch the high watermark was read in: a new leader takes a higher one; "
        "null if unknown",
        True,
    ),
)

GROUP_OFFSETS = _schema(
    _column("group_id", pa.string(), "consumer group id"),
    _column("topic", pa.string(), "topic name (monitored topics only)"),
    _column("partition", pa.int32(), "partition number"),
    _column("committed_offset", pa.int64(), "the group's committed offset: next to process"),
    _column("group_state", pa.string(), "group state at sampling time (Stable, Empty, ...)"),
    _column("member_id", pa.string(), "member assigned the partition; null if none", True),
    _column("high_watermark", pa.int64(), "the partition's high watermark, same cycle", True),
    _column("lso", pa.int64(), "the partition's LSO, same cycle", True),
    _column(
        "lag_from_hw",
        pa.int64(),
        "high_watermark - committed_offset: the lag other tools show; counts control markers, "
        "aborted and still-open transactional records as lag",
        True,
    ),
    _column(
        "lag_from_lso",
        pa.int64(),
        "lso - committed_offset: the transaction-correct lag of a read_committed consumer; "
        "negative when the group committed past the LSO (a read_uncommitted consumer)",
        True,
    ),
    _column(
        "group_type",
        pa.string(),
        "classic, consumer (KIP-848) or share (KIP-932); a share group's committed_offset is "
        "its share-partition start offset: every record below it acknowledged or archived; "
        "null if unknown (samples of older dgm versions)",
        True,
    ),
    _column(
        "share_lag",
        pa.int64(),
        "a share group's share-partition lag as the broker counts it (KIP-1226, Kafka 4.2+): "
        "records from committed_offset to the high watermark not yet acknowledged or archived; "
        "null for other groups and where the broker does not tell it",
        True,
    ),
)

GROUP_MEMBERS = _schema(
    _column("group_id", pa.string(), "consumer group id"),
    _column("group_state", pa.string(), "Stable, PreparingRebalance, CompletingRebalance, ..."),
    _column("group_type", pa.string(), "classic or consumer (KIP-848) protocol"),
    _column("assignor", pa.string(), "partition assignor of the group; '' if none"),
    _column("coordinator_id", pa.int32(), "broker id of the group coordinator", True),
    _column("member_count", pa.int32(), "members in the group at sampling time"),
    # Folded: a group with no members still gets one row, with the member columns null, so
    # that its state is sampled. Kafka's admin APIs expose no generation for classic groups;
    # rebalances are derived from state and assignment changes instead (see events).
    _column("member_id", pa.string(), "member id; null on the row of an empty group", True),
    _column("client_id", pa.string(), "the member's client.id", True),
    _column("host", pa.string(), "the member's host as the coordinator saw it", True),
    _column("group_instance_id", pa.string(), "static membership id, if set", True),
    _column("assignment", pa.list_(PARTITION), "partitions assigned to the member", True),
)

PRODUCERS = _schema(
    _column("topic", pa.string(), "topic name"),
    _column("partition", pa.int32(), "partition number"),
    _column("producer_id", pa.int64(), "producer id (PID) with state on the partition"),
    _column("producer_epoch", pa.int32(), "the producer's epoch on the partition"),
    _column("last_sequence", pa.int32(), "last sequence number written; -1 if none"),
    _column("last_timestamp", TIMESTAMP, "timestamp of the producer's last write", True),
    _column("coordinator_epoch", pa.int32(), "epoch of the coordinator that wrote last marker"),
    _column(
        "txn_start_offset",
        pa.int64(),
        "first offset of the producer's open transaction on the partition; null if none open",
        True,
    ),
    _column(
        "transactional_id", pa.string(), "the coordinator's transactional id for the PID", True
    ),
    _column(
        "idle_ms",
        pa.int64(),
        "sampled_at - last_timestamp: what kafka-transactions.sh find-hanging compares with "
        "the maximum transaction timeout",
        True,
    ),
    _column("hanging", pa.bool_(), "the open transaction is hanging, as find-hanging decides"),
    _column("hanging_reason", pa.string(), "why it is hanging; null if it is not", True),
)

TRANSACTIONS = _schema(
    _column("transactional_id", pa.string(), "transactional.id of the producer"),
    _column("producer_id", pa.int64(), "producer id the coordinator holds for it"),
    _column("producer_epoch", pa.int32(), "producer epoch the coordinator holds for it"),
    _column("state", pa.string(), "Empty, Ongoing, PrepareCommit, CompleteAbort, ..."),
    _column("transaction_timeout_ms", pa.int32(), "the producer's transaction.timeout.ms"),
    _column("transaction_start", TIMESTAMP, "when the current or last transaction began", True),
    _column("open_ms", pa.int64(), "sampled_at - transaction_start while open; else null", True),
    _column(
        "timed_out",
        pa.bool_(),
        "open longer than its own timeout: the coordinator should have aborted it",
    ),
    _column("coordinator_id", pa.int32(), "broker id of the transaction coordinator"),
    _column("partitions", pa.list_(PARTITION), "partitions in the open transaction"),
)

EVENTS = _schema(
    _column(
        "event",
        pa.string(),
        "collector_start, outage_start, outage_end, broker_joined, broker_left, rebalance, "
        "member_joined, member_left, epoch_bump, topic_recreated, authorization_failed, "
        "authorization_restored, capability_missing, capability_restored, "
        "high_watermark_backwards, log_start_backwards, lso_backwards "
        "(a partition's offset went down between two samples: a truncated log); "
        "recorded by the audit: schema_lookup_failed, schema_lookup_restored "
        "(a schema its records name that the topic's schema registry did not give)",
    ),
    _column(
        "group_id",
        pa.string(),
        "rebalance, member_joined, member_left; authorization_*: the group refused",
        True,
    ),
    _column("member_id", pa.string(), "member_joined, member_left", True),
    _column("client_id", pa.string(), "member_joined, member_left", True),
    _column("producer_id", pa.int64(), "epoch_bump: the producer id after the bump", True),
    _column(
        "transactional_id",
        pa.string(),
        "epoch_bump, when the producer has one; authorization_*: the id refused",
        True,
    ),
    _column("broker_id", pa.int32(), "broker_joined, broker_left", True),
    _column(
        "before",
        pa.int64(),
        "epoch_bump: old epoch; rebalance: members before; outage_end: null; "
        "*_backwards: the offset at the previous sample",
        True,
    ),
    _column(
        "after",
        pa.int64(),
        "epoch_bump: new epoch; rebalance: members after; outage_end: outage length in ms; "
        "*_backwards: the offset now, lower",
        True,
    ),
    _column(
        "detail",
        pa.string(),
        "one human-readable line; authorization_*: 'cannot see X: missing permission Y'; "
        "schema_lookup_failed: 'cannot read the schema N (content|global id) of topic T from "
        "the schema registry of cluster C: reason'",
    ),
    _column(
        "topic",
        pa.string(),
        "topic_recreated, *_backwards: the topic; authorization_*, schema_lookup_*: the topic",
        True,
    ),
    _column("partition", pa.int32(), "*_backwards: the partition", True),
    _column(
        "leader_epoch",
        pa.int32(),
        "*_backwards: the leader epoch the lower offset was read in, if known",
        True,
    ),
)

# Sample kind -> schema; the kind is also the directory name under <state_dir>/samples/.
SCHEMAS: dict[str, pa.Schema] = {
    "offsets": OFFSETS,
    "group_offsets": GROUP_OFFSETS,
    "group_members": GROUP_MEMBERS,
    "producers": PRODUCERS,
    "transactions": TRANSACTIONS,
    "events": EVENTS,
}
