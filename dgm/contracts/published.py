"""The DuckDB tables `dgm analyze` publishes: the contract with the dashboard and the alerts.

Every run writes all of them into a new DuckDB file and renames it over the published one
(`<state_dir>/dgm.duckdb`), so a reader sees one whole run or the one before, never a mix.
Each column is documented where it is declared; the words are docs/design.md's. Times are UTC
TIMESTAMPTZ; `window_start` is the start of a window of `analysis.window_s` seconds (by the
records' Kafka timestamps); totals ("cumulative") span the fingerprint retention. The views
published with them (one level of detail each, the newest samples) are in
dgm.contracts.published_views.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from dgm.contracts.vocabulary import (
    Achieved,
    Anomaly,
    Claim,
    DuplicateCause,
    Evidence,
    GroupStatus,
    LossCause,
    OrderAnomaly,
    listing,
    severity_legend,
)

PUBLISHED_FILE = "dgm.duckdb"
# The `cluster` columns (docs/design.md, "Several clusters"): filled from the row's topic or
# group by dgm.contracts.clusters.cluster_of when the analysis publishes (spark_jobs/analyze).
_CLUSTER_DOC = (
    "the cluster the row's topic (or group) lives on: 'default' ([cluster]) or a "
    "[clusters.<name>]; its topic and group names are qualified '<cluster>/<name>' off the "
    "default cluster; null for an external sink"
)


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    doc: str


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    def ddl(self) -> str:
        body = ",\n    ".join(f'"{c.name}" {c.sql_type}' for c in self.columns)
        return f'CREATE TABLE "{self.name}" (\n    {body}\n)'

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _table(name: str, doc: str, *columns: tuple[str, str, str]) -> Table:
    return Table(name, doc, tuple(Column(*c) for c in columns))


RUNS = _table(
    "runs",
    "One row: the run these tables come from, and how fresh its inputs were.",
    ("run_id", "VARCHAR", "unique id of the analysis run"),
    ("started_at", "TIMESTAMPTZ", "when the run began"),
    ("finished_at", "TIMESTAMPTZ", "when its tables were complete (just before publication)"),
    ("last_sample_at", "TIMESTAMPTZ", "newest collector sample read; null without samples"),
    ("records_audited", "BIGINT", "records fingerprinted by this run's audit"),
    ("fingerprints", "BIGINT", "fingerprints analyzed (everything within retention)"),
    ("window_s", "INTEGER", "window length in seconds"),
    ("spark_master", "VARCHAR", "Spark master the run used"),
)

# A sampled pipeline's counts are its kept ids' (docs/design.md, "Sampled pipelines"): its
# rates are estimates, each with a 95% interval; a pipeline that keeps every id has
# sample_one_in 1 and intervals equal to its rates.
SAMPLE_COLUMNS = (
    ("sample_one_in", "BIGINT", "1 in this many message ids is kept and counted; 1: every id"),
    ("duplicate_rate_low", "DOUBLE", "95% interval of the pipeline's duplicate_rate: low end"),
    ("duplicate_rate_high", "DOUBLE", "95% interval of the pipeline's duplicate_rate: high end"),
    ("loss_rate_low", "DOUBLE", "95% interval of the pipeline's loss_rate: low end"),
    (
        "loss_rate_high",
        "DOUBLE",
        "95% interval of the pipeline's loss_rate: high end (with no loss seen in a sample, "
        "the bound a loss rate could still reach)",
    ),
)

VERDICTS = _table(
    "verdicts",
    "Per pipeline, cumulative over the retention: the achieved semantic and its evidence.",
    ("pipeline", "VARCHAR", "pipeline name from dgm.toml"),
    ("declared", "VARCHAR", "declared_semantic from dgm.toml"),
    (
        "achieved",
        "VARCHAR",
        listing(Achieved),
    ),
    (
        "meets_declared",
        "BOOLEAN",
        f"achieved is at least as strong as declared; null when achieved is "
        f"{Achieved.INSUFFICIENT_EVIDENCE}",
    ),
    (
        "records_checked",
        "BIGINT",
        "committed source records below the group's committed "
        "offset and past the grace period, or older than a deadline claim's max_delay (the "
        "ones whose fate is known)",
    ),
    ("sink_records", "BIGINT", "committed sink records (rows of an external sink)"),
    ("distinct_ids", "BIGINT", "distinct message ids in the sink"),
    ("duplicate_copies", "BIGINT", "extra sink copies, upstream duplicates excluded"),
    ("duplicate_rate", "DOUBLE", "duplicate_copies / distinct_ids; null without ids"),
    ("upstream_duplicates", "BIGINT", "extra sink copies the source already held twice"),
    ("lost", "BIGINT", "lost ids: never reached the sink, or sequence gaps at the producer"),
    ("loss_rate", "DOUBLE", "lost / records_checked; null when nothing was checked"),
    (
        "aborted_reads",
        "BIGINT",
        "sink records whose id the source holds only in aborted transactions",
    ),
    ("unidentified", "BIGINT", "committed records (source and sink) without a message id"),
    (
        "beyond_retention",
        "BIGINT",
        "source records not judged: missing from the sink, but older than the oldest sink "
        "record dgm holds, so their copy may have been deleted by retention",
    ),
    (
        "faults_observed",
        "BIGINT",
        "faults seen while the checked records flowed: rebalances, "
        "member changes, new producer sessions (epoch_bump), broker outages",
    ),
    (
        "evidence",
        "VARCHAR",
        f"{Evidence.TESTED} (anomaly-free or not, across faults) | {Evidence.UNTESTED} (no "
        f"fault seen: weaker evidence) | {Evidence.NONE}",
    ),
    ("first_record_at", "TIMESTAMPTZ", "oldest checked source record"),
    ("last_record_at", "TIMESTAMPTZ", "newest checked source record"),
    ("source_topics", "VARCHAR[]", "the pipeline's source topics"),
    ("sink", "VARCHAR[]", "sink topics, or 'external:<table>' for an external sink"),
    (
        "consumer_group",
        "VARCHAR",
        "the group whose committed offsets bound the check; for a deadline claim the group "
        "whose faults count, null without one",
    ),
    (
        "late_records",
        "BIGINT",
        "checked ids delivered later than the pipeline's objective (docs/design.md, \"Late "
        "records\"): latency_objective by arrivals, else a deadline claim's max_delay by "
        "timestamps; delivered late, not lost (the rows: late_records)",
    ),
    (
        "claim",
        "VARCHAR",
        f"what says a source record should be in the sink: {listing(Claim)}",
    ),
    (
        "claim_detail",
        "VARCHAR",
        "the claim's own words: 'group <id>', 'table <name>, group <id>', 'max_delay 5m'",
    ),
    (
        "filtered",
        "BIGINT",
        "committed source records the pipeline's `expected` predicate excludes: never checked, "
        "never lost",
    ),
    (
        "filter_undecided",
        "BIGINT",
        "committed source records the predicate could not evaluate (NULL, e.g. malformed "
        "JSON): expected, so checked like any other",
    ),
    ("source_cluster", "VARCHAR", "the cluster of the source topics and consumer group"),
    ("sink_cluster", "VARCHAR", "the cluster of the sink topics (with an external sink too)"),
    (
        "torn_commits",
        "BIGINT",
        f"lost records of cause '{LossCause.TORN_COMMIT}': the sink holds the id only in "
        "aborted transactions while the claim covers the source record (a transaction "
        "protocol failure)",
    ),
    (
        "producer_out_of_order",
        "BIGINT",
        f"'{OrderAnomaly.OUT_OF_ORDER}' records of its source topics: behind a higher dgm-seq "
        "of their producer session in their partition (order: beside the verdict, never in it)",
    ),
    (
        "sink_out_of_order",
        "BIGINT",
        f"'{OrderAnomaly.SINK_OUT_OF_ORDER}' records of its sink topics: behind a higher "
        "dgm-src offset of their source partition in their sink partition (order)",
    ),
    (
        "truncated_records",
        "BIGINT",
        "committed records of its source and sink topics dgm audited at an offset their "
        "truncated log no longer holds them at (Jepsen: lost-write); see log_anomalies",
    ),
    (
        "inconsistent_offsets",
        "BIGINT",
        "audited offsets of its source and sink topics that hold another id now (Jepsen: "
        "inconsistent-offsets)",
    ),
    (
        "latency_p50_s",
        "DOUBLE",
        'delivery latency (docs/design.md, "Delivery latency"): median seconds from a checked '
        "record becoming readable to its first sink copy becoming readable; null when none "
        "was measured",
    ),
    ("latency_p95_s", "DOUBLE", "95th percentile of the delivery latency, seconds"),
    ("latency_p99_s", "DOUBLE", "99th percentile of the delivery latency, seconds"),
    (
        "latency_max_s",
        "DOUBLE",
        "the largest delivery latency, at most: the upper bound of the highest non-empty bucket",
    ),
    ("latency_measured", "BIGINT", "checked records whose delivery latency was measured"),
    *SAMPLE_COLUMNS,
)

PIPELINE_WINDOWS = _table(
    "pipeline_windows",
    "Per pipeline and window: the same counts and a verdict for the window alone.",
    ("pipeline", "VARCHAR", "pipeline name"),
    ("window_start", "TIMESTAMPTZ", "window start (source record timestamps)"),
    ("records_checked", "BIGINT", "as in verdicts, in this window"),
    ("duplicate_copies", "BIGINT", "extra sink copies whose timestamp is in this window"),
    ("duplicate_rate", "DOUBLE", "duplicate_copies / distinct sink ids of the window"),
    ("lost", "BIGINT", "lost ids whose source record is in this window"),
    ("loss_rate", "DOUBLE", "lost / records_checked"),
    ("aborted_reads", "BIGINT", "aborted reads in this window"),
    ("beyond_retention", "BIGINT", "as in verdicts, in this window"),
    ("faults_observed", "BIGINT", "faults whose time is in this window"),
    ("achieved", "VARCHAR", "verdict of this window alone"),
    ("meets_declared", "BOOLEAN", "as in verdicts"),
    ("late_records", "BIGINT", "as in verdicts, whose source record is in this window"),
    ("filtered", "BIGINT", "as in verdicts, source records of this window"),
    ("filter_undecided", "BIGINT", "as in verdicts, source records of this window"),
    ("torn_commits", "BIGINT", "as in verdicts, whose source record is in this window"),
    ("producer_out_of_order", "BIGINT", "as in verdicts, records timestamped in this window"),
    ("sink_out_of_order", "BIGINT", "as in verdicts, records timestamped in this window"),
    ("truncated_records", "BIGINT", "as in verdicts, whose record is in this window"),
    ("inconsistent_offsets", "BIGINT", "as in verdicts, whose audited record is in this window"),
    ("latency_p50_s", "DOUBLE", "as in verdicts, of the checked records of this window"),
    ("latency_p95_s", "DOUBLE", "as in verdicts, of the checked records of this window"),
    ("latency_p99_s", "DOUBLE", "as in verdicts, of the checked records of this window"),
    ("latency_max_s", "DOUBLE", "as in verdicts, of the checked records of this window"),
    ("latency_measured", "BIGINT", "as in verdicts, of this window"),
    *SAMPLE_COLUMNS,
)

LATENCY_HISTOGRAM = _table(
    "latency_histogram",
    "Per pipeline and window: checked records per delivery-latency bucket (4 a doubling).",
    ("pipeline", "VARCHAR", "pipeline name"),
    ("window_start", "TIMESTAMPTZ", "window start (source record timestamps)"),
    ("low_s", "DOUBLE", "the bucket's lower bound, seconds (inclusive)"),
    ("high_s", "DOUBLE", "the bucket's upper bound, seconds (exclusive)"),
    ("records", "BIGINT", "checked records whose delivery latency falls in the bucket"),
)

TOPIC_WINDOWS = _table(
    "topic_windows",
    "Per topic and window (window_start null: cumulative): what the topic holds.",
    ("topic", "VARCHAR", "topic name"),
    ("window_start", "TIMESTAMPTZ", "window start; null for the cumulative row"),
    ("records", "BIGINT", "committed records"),
    ("distinct_ids", "BIGINT", "distinct message ids among committed records"),
    ("duplicate_copies", "BIGINT", "extra committed copies of an id (first copy per retention)"),
    ("duplicate_rate", "DOUBLE", "duplicate_copies / distinct_ids"),
    ("unidentified", "BIGINT", "committed records without a message id"),
    ("aborted", "BIGINT", "records of aborted transactions"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
    (
        "out_of_order",
        "BIGINT",
        "committed records out of order (rows of out_of_order, each record once): behind a "
        "higher dgm-seq of their producer session, or a higher source offset of their source "
        "partition",
    ),
    (
        "truncated_records",
        "BIGINT",
        "committed records audited at an offset the truncated log no longer holds them at",
    ),
    ("inconsistent_offsets", "BIGINT", "audited offsets that hold another id now"),
)

PARTITION_WINDOWS = _table(
    "partition_windows",
    "Per topic, partition and window: for the drill-down heat map.",
    ("topic", "VARCHAR", "topic name"),
    ("partition", "INTEGER", "partition"),
    ("window_start", "TIMESTAMPTZ", "window start"),
    ("records", "BIGINT", "committed records"),
    ("duplicate_copies", "BIGINT", "extra copies located in this partition"),
    ("aborted", "BIGINT", "aborted records"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

DUPLICATES = _table(
    "duplicates",
    "Every copy of every duplicated id, per topic (pipeline set when the topic is a sink).",
    (
        "pipeline",
        "VARCHAR",
        "pipeline whose sink holds the copies; null for a topic that is no pipeline's sink",
    ),
    ("topic", "VARCHAR", "topic (or 'external:<table>')"),
    ("message_id", "VARCHAR", "the duplicated id"),
    ("copies", "BIGINT", "committed copies of the id in the topic"),
    ("copy_number", "BIGINT", "1 for the first copy by (timestamp, partition, offset)"),
    ("is_extra_copy", "BOOLEAN", "copy_number > 1"),
    ("partition", "INTEGER", "partition of this copy"),
    ("offset", "BIGINT", "offset of this copy (row id for an external sink)"),
    ("timestamp", "TIMESTAMPTZ", "Kafka timestamp of this copy"),
    ("key", "VARCHAR", "record key as text"),
    ("producer", "VARCHAR", "dgm-producer header"),
    ("seq", "BIGINT", "dgm-seq header"),
    ("lineage", "VARCHAR", "dgm-src header"),
    ("cause", "VARCHAR", listing(DuplicateCause)),
    (
        "evidence",
        "VARCHAR",
        'what names the cause, in one line (docs/design.md, "Causes without dgm\'s headers"); '
        "null when nothing was found",
    ),
    (
        "source_topic",
        "VARCHAR",
        "the source record the id joins to: the id's one committed record in the pipeline's "
        "source topics; null when none or several",
    ),
    ("source_partition", "INTEGER", "partition of that source record"),
    ("source_offset", "BIGINT", "offset of that source record"),
    ("producer_id", "BIGINT", "producer id in this copy's record batch; null if none was read"),
    ("producer_epoch", "INTEGER", "producer epoch in this copy's record batch"),
    (
        "producer_sequence",
        "BIGINT",
        "this record's sequence number in its producer session (batch base sequence + delta)",
    ),
    (
        "arrived_at",
        "TIMESTAMPTZ",
        "when this copy became readable (the LSO passed it), interpolated between samples",
    ),
    ("arrival_resolution_s", "DOUBLE", "seconds between the two samples arrived_at lies between"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

LOST = _table(
    "lost",
    "Every lost id of a pipeline, with its source coordinates and why it counts as lost.",
    ("pipeline", "VARCHAR", "pipeline name"),
    ("message_id", "VARCHAR", "lost id; null for a sequence gap (the id never reached Kafka)"),
    ("topic", "VARCHAR", "source topic"),
    ("partition", "INTEGER", "source partition"),
    ("offset", "BIGINT", "source offset; null for a sequence gap"),
    ("timestamp", "TIMESTAMPTZ", "source record timestamp; null for a sequence gap"),
    ("producer", "VARCHAR", "dgm-producer of the source record or of the gap"),
    ("seq", "BIGINT", "dgm-seq of the record, or first missing sequence of the gap"),
    ("missing", "BIGINT", "1 for a record; the length of a sequence gap"),
    (
        "cause",
        "VARCHAR",
        f"{LossCause.NOT_IN_SINK} (below the committed offset, past the grace period) | "
        f"{LossCause.SEQUENCE_GAP} | {LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY} (a deadline "
        f"claim: no sink copy once older than max_delay) | {LossCause.TORN_COMMIT} (the sink "
        "holds the id only in aborted transactions, the claim past the source record) | "
        f"{LossCause.TRUNCATION} (the source record, or every sink copy of its id, was "
        "truncated from its partition's log)",
    ),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
    (
        "aborted_copy",
        "VARCHAR",
        f"{LossCause.TORN_COMMIT}: the first aborted sink record holding the id, "
        "'topic/partition/offset' (the evidence); null otherwise",
    ),
)

LATE_RECORDS = _table(
    "late_records",
    'Every late record (docs/design.md, "Late records"): a checked record delivered later '
    "than its pipeline's objective after it; the slowest first is the slowest delivery.",
    ("pipeline", "VARCHAR", "pipeline name"),
    ("message_id", "VARCHAR", "its id"),
    ("topic", "VARCHAR", "source topic"),
    ("partition", "INTEGER", "source partition"),
    ("offset", "BIGINT", "source offset"),
    ("timestamp", "TIMESTAMPTZ", "source record timestamp"),
    ("delay_s", "DOUBLE", "how long after the record its first sink copy came, seconds"),
    (
        "measured_by",
        "VARCHAR",
        "arrivals (latency_objective: when each became readable, from the LSO samples) | "
        "timestamps (a deadline claim's max_delay: the copy's timestamp minus the record's)",
    ),
    ("first_copy", "VARCHAR", "the first sink copy by that measure, 'topic/partition/offset'"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

OUT_OF_ORDER = _table(
    "out_of_order",
    'Every committed record out of order (docs/design.md, "Order, beside the delivery '
    'semantic"): behind a higher position of its stream at a lower offset of its partition.',
    ("anomaly", "VARCHAR", listing(OrderAnomaly)),
    (
        "pipeline",
        "VARCHAR",
        f"{OrderAnomaly.SINK_OUT_OF_ORDER}: the pipeline writing the sink from the stream's "
        "source topic (a row per such pipeline); null otherwise",
    ),
    ("topic", "VARCHAR", "the topic holding the record"),
    ("partition", "INTEGER", "its partition"),
    ("offset", "BIGINT", "its offset"),
    ("timestamp", "TIMESTAMPTZ", "its Kafka timestamp"),
    ("message_id", "VARCHAR", "its id; null when unidentified"),
    (
        "stream",
        "VARCHAR",
        "the dgm-producer session, or the source partition ('topic/partition') the sink "
        "record was made from",
    ),
    ("position", "BIGINT", "its dgm-seq, or its source offset"),
    ("preceded_by", "BIGINT", "the highest position of its stream at a lower offset"),
    ("preceded_at", "BIGINT", "the offset of the first record holding preceded_by"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

PIPELINE_STAGES = _table(
    "pipeline_stages",
    "Per pipeline, cumulative: the producer stage (what reached the first source) and the "
    "end-to-end semantic from the first source to this pipeline's sink (docs/design.md, "
    '"Stages and the end-to-end semantic").',
    ("pipeline", "VARCHAR", "pipeline name"),
    (
        "chain",
        "VARCHAR[]",
        "the pipelines from the first source to this one, in order (this one last); a "
        "pipeline reads another's output when one of its source topics is the other's sink",
    ),
    ("first_sources", "VARCHAR[]", "the chain's first source topics (where producers write)"),
    ("producer_records", "BIGINT", "committed records in the first source topics"),
    (
        "producer_duplicate_copies",
        "BIGINT",
        "extra committed copies of an id in the first source topics (producer retries and "
        "any other duplicate the producers wrote)",
    ),
    ("producer_duplicate_rate", "DOUBLE", "producer_duplicate_copies / distinct ids there"),
    (
        "producer_sequence_gaps",
        "BIGINT",
        "records missing from the first sources' producer sessions (dgm-seq gaps); null when "
        "no first source holds a record stamped with dgm-seq (not measured)",
    ),
    ("producer_achieved", "VARCHAR", f"the producer stage's semantic: {listing(Achieved)}"),
    (
        "end_to_end_achieved",
        "VARCHAR",
        "the semantic from the first source to this sink: the producer stage and every "
        "pipeline of the chain composed",
    ),
    (
        "producer_truncated_records",
        "BIGINT",
        "acknowledged records of the first sources that truncated logs lost: losses of the "
        "producer stage",
    ),
)

PARTITION_OFFSETS = _table(
    "partition_offsets",
    "The collectors' offsets samples as a series (Transactions & LSO page).",
    ("sampled_at", "TIMESTAMPTZ", "sample time"),
    ("topic", "VARCHAR", "topic"),
    ("partition", "INTEGER", "partition"),
    ("log_start_offset", "BIGINT", "first offset in the log"),
    ("high_watermark", "BIGINT", "end of the log"),
    ("lso", "BIGINT", "last stable offset"),
    ("lso_lag", "BIGINT", "high_watermark - lso"),
    ("lso_stuck_ms", "BIGINT", "how long the LSO has not moved with records above it"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

GROUP_LAG = _table(
    "group_lag",
    "The collectors' group offsets as a series: lag both ways.",
    ("sampled_at", "TIMESTAMPTZ", "sample time"),
    ("group_id", "VARCHAR", "consumer group"),
    ("topic", "VARCHAR", "topic"),
    ("partition", "INTEGER", "partition"),
    (
        "committed_offset",
        "BIGINT",
        "committed offset; a share group's share-partition start offset (docs/design.md, "
        '"Share groups")',
    ),
    ("group_state", "VARCHAR", "group state"),
    (
        "group_type",
        "VARCHAR",
        "classic, consumer (KIP-848) or share (KIP-932); null for samples of older dgm versions",
    ),
    ("lag_from_hw", "BIGINT", "high watermark - committed (what other tools show)"),
    ("lag_from_lso", "BIGINT", "LSO - committed (transaction-correct)"),
    (
        "share_lag",
        "BIGINT",
        "a share group's share-partition lag as the broker counts it (KIP-1226, Kafka 4.2+): "
        "records from the start offset to the high watermark not yet acknowledged or archived; "
        "lag_from_hw - share_lag were acknowledged above the start offset; null for other groups",
    ),
    (
        "lag_s",
        "DOUBLE",
        "lag in seconds: how long ago the oldest record not yet committed became readable "
        '(passed the LSO), interpolated between offsets samples (docs/design.md, "Lag in '
        'seconds"); 0 with nothing left to commit; null when unknown',
    ),
    (
        "lag_s_at_least",
        "BOOLEAN",
        "the record arrived before the first retained offsets sample: lag_s is a lower bound",
    ),
    (
        "lag_s_resolution",
        "DOUBLE",
        "seconds between the two offsets samples the record's arrival lies between: lag_s is "
        "exact to within it",
    ),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

GROUP_STATUS = _table(
    "group_status",
    "Per consumer group and partition, the status Burrow's rules give over the last "
    "analysis.group_status_window samples of lag from the LSO (docs/design.md, "
    '"Consumer-group status"); one row per group with topic and partition null holds the '
    "group's worst status.",
    ("group_id", "VARCHAR", "consumer group"),
    ("topic", "VARCHAR", "topic; null on the group's own row"),
    ("partition", "INTEGER", "partition; null on the group's own row"),
    ("status", "VARCHAR", f"{listing(GroupStatus)} (the group row: the worst)"),
    ("severity", "INTEGER", severity_legend()),
    ("reason", "VARCHAR", "which rule decided, in words"),
    (
        "status_from_hw",
        "VARCHAR",
        "what the same rules say with lag from the high watermark instead: differs from "
        "status when records past the LSO (an open transaction, markers) count as lag",
    ),
    ("samples", "INTEGER", "samples in the window (the group row: of its partitions, fewest)"),
    ("window_start", "TIMESTAMPTZ", "oldest sample of the window"),
    ("window_end", "TIMESTAMPTZ", "newest sample of the window"),
    ("committed_start", "BIGINT", "committed offset at window_start; null on the group row"),
    ("committed_end", "BIGINT", "committed offset at window_end; null on the group row"),
    ("lso_lag_start", "BIGINT", "LSO - committed at window_start (the group row: summed)"),
    ("lso_lag_end", "BIGINT", "LSO - committed at window_end (the group row: summed)"),
    (
        "hw_lag_end",
        "BIGINT",
        "high watermark - committed at window_end (the group row: summed); above lso_lag_end "
        "when records past the LSO count as lag",
    ),
    ("lag_s_start", "DOUBLE", "lag in seconds at window_start (the group row: the largest)"),
    (
        "lag_s_end",
        "DOUBLE",
        "lag in seconds at window_end: the age of the oldest record not yet committed (the "
        "group row: the largest); null when unknown",
    ),
    ("lag_s_at_least", "BOOLEAN", "lag_s_end is a lower bound (see group_lag.lag_s_at_least)"),
    (
        "lag_s_trend",
        "DOUBLE",
        "seconds of lag gained per second over the window (least squares); below 0 the lag "
        "shrinks (the group row: the largest)",
    ),
    ("consume_rate", "DOUBLE", "records committed per second over the window (group: summed)"),
    ("produce_rate", "DOUBLE", "records per second passing the LSO over the window (summed)"),
    (
        "catch_up_s",
        "DOUBLE",
        "estimated seconds until lag reaches 0 at the window's rates: (LSO - committed) / "
        "(consume_rate - produce_rate); 0 when caught up; null when keeping pace or not "
        "catching up (the group row: its slowest partition's)",
    ),
    (
        "catching_up",
        "BOOLEAN",
        "nothing left to commit, commits outpace arrivals, or everything was committed at "
        "some sample of the window (keeping pace); null with fewer than 2 samples (the group "
        "row: every partition)",
    ),
    (
        "last_commit_at",
        "TIMESTAMPTZ",
        "first sample that saw the committed offset at its current value: when it last moved, "
        "as sampled (the group row: the latest)",
    ),
    ("member_id", "VARCHAR", "member assigned the partition at window_end; null if none"),
    ("group_state", "VARCHAR", "group state at window_end"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

TRANSACTIONS = _table(
    "transactions",
    "Open transactions per partition at the last sample, and whether each is hanging.",
    ("sampled_at", "TIMESTAMPTZ", "sample time"),
    ("topic", "VARCHAR", "topic"),
    ("partition", "INTEGER", "partition"),
    ("producer_id", "BIGINT", "producer id"),
    ("producer_epoch", "INTEGER", "producer epoch"),
    ("transactional_id", "VARCHAR", "transactional.id, when the coordinator knows it"),
    ("txn_start_offset", "BIGINT", "first offset of the open transaction"),
    ("age_ms", "BIGINT", "how long the producer has been idle on the partition"),
    ("hanging", "BOOLEAN", "as kafka-transactions.sh find-hanging decides"),
    ("hanging_reason", "VARCHAR", "why it is hanging"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

PRODUCER_SESSIONS = _table(
    "producer_sessions",
    "Every producer session the brokers held state for on a monitored partition (the "
    "collectors' DescribeProducers samples: what the partition's record batch headers said), "
    "one row per partition, producer id and epoch.",
    ("topic", "VARCHAR", "topic"),
    ("partition", "INTEGER", "partition"),
    ("producer_id", "BIGINT", "producer id (PID)"),
    ("producer_epoch", "INTEGER", "producer epoch"),
    ("first_seen", "TIMESTAMPTZ", "first sample holding this id and epoch on the partition"),
    ("last_seen", "TIMESTAMPTZ", "last sample holding it"),
    ("last_sequence", "BIGINT", "highest last sequence number sampled; -1 if none"),
    ("last_timestamp", "TIMESTAMPTZ", "timestamp of its newest write sampled"),
    ("transactional_id", "VARCHAR", "transactional.id, when the coordinator knows it"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

LOG_ANOMALIES = _table(
    "log_anomalies",
    "Every truncated record and inconsistent offset the re-reads of audited offsets found "
    '(docs/design.md, "Log integrity"), with the nearest name Jepsen gives it.',
    ("anomaly", "VARCHAR", listing(Anomaly)),
    ("jepsen", "VARCHAR", ", ".join(f"{a.jepsen} ({a.value})" for a in Anomaly)),
    ("topic", "VARCHAR", "topic"),
    ("partition", "INTEGER", "partition"),
    ("offset", "BIGINT", "the offset the record was audited at"),
    ("message_id", "VARCHAR", "the id audited there"),
    (
        "now_message_id",
        "VARCHAR",
        "the id of the record the offset holds now; null when it holds none (or lies past the "
        "high watermark), or when that record has no id",
    ),
    ("timestamp", "TIMESTAMPTZ", "Kafka timestamp of the record audited there"),
    ("key", "VARCHAR", "its key as text"),
    ("producer", "VARCHAR", "its dgm-producer header"),
    ("seq", "BIGINT", "its dgm-seq header"),
    ("detected_at", "TIMESTAMPTZ", "when a re-read found it"),
    ("cluster", "VARCHAR", _CLUSTER_DOC),
)

FAULTS = _table(
    "faults",
    "Faults the collectors observed (the events sample kind): what gives verdicts weight.",
    ("at", "TIMESTAMPTZ", "when the collector saw it"),
    (
        "event",
        "VARCHAR",
        "rebalance, member_joined, member_left, epoch_bump, outage_start, "
        "outage_end, broker_left, broker_joined, collector_start, topic_recreated, "
        "authorization_failed, authorization_restored, capability_missing, "
        "capability_restored, high_watermark_backwards, log_start_backwards, lso_backwards, "
        "schema_lookup_failed, schema_lookup_restored",
    ),
    ("group_id", "VARCHAR", "group, for group events"),
    ("pipeline", "VARCHAR", "pipeline the fault is attributed to; null when cluster-wide"),
    ("detail", "VARCHAR", "one human-readable line"),
    ("cluster", "VARCHAR", "the cluster whose collector saw it (as in the other cluster columns)"),
)

TABLES: tuple[Table, ...] = (
    RUNS,
    VERDICTS,
    PIPELINE_WINDOWS,
    TOPIC_WINDOWS,
    PARTITION_WINDOWS,
    DUPLICATES,
    LOST,
    LATE_RECORDS,
    PIPELINE_STAGES,
    LATENCY_HISTOGRAM,
    PARTITION_OFFSETS,
    GROUP_LAG,
    GROUP_STATUS,
    TRANSACTIONS,
    PRODUCER_SESSIONS,
    FAULTS,
    OUT_OF_ORDER,
    LOG_ANOMALIES,
)


def published_path(state_dir: Path) -> Path:
    return Path(state_dir) / PUBLISHED_FILE


def open_read_only(path: Path) -> duckdb.DuckDBPyConnection:
    """The one way to read a publication (dashboard, alerts, `dgm verdicts`, status lines).

    The connection keeps seeing the run it opened while newer ones are published, and a new
    call sees the newest run even while older connections stay open. FileNotFoundError when
    nothing is published yet; duckdb.Error when the file cannot be read."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: nothing published yet (run dgm analyze)")
    # ATTACH to a fresh in-memory database, not duckdb.connect(path): connect() reuses the
    # process's open instance of a path, which would hold the file of an older run.
    connection = duckdb.connect()
    try:
        quoted = str(path).replace("'", "''")
        connection.execute(f"ATTACH '{quoted}' AS published (READ_ONLY)")
        connection.execute("USE published")
    except BaseException:
        connection.close()
        raise
    return connection


# A publication is stale past this many analysis cycles (interval plus the run's own length).
STALE_AFTER_CYCLES = 3
STALE_AFTER_AT_LEAST_S = 60.0


def stale_after_s(interval_s: float, run_s: float = 0.0) -> float:
    """Age beyond which a publication is stale: max(3 x (analysis.interval_s + the published
    run's duration), 60 s). Analyses finish one run plus one interval apart, so a slow run is
    not mistaken for a stopped `dgm analyze`. The one threshold `dgm verdicts`, the exporter
    (dgm_analysis_stale_after_seconds, which the Prometheus rule DgmAnalysisStale compares
    with) and the dashboard's STALE banner use."""
    cycle = interval_s + max(run_s, 0.0)
    return max(STALE_AFTER_CYCLES * cycle, STALE_AFTER_AT_LEAST_S)


def run_duration_s(db: duckdb.DuckDBPyConnection) -> float:
    """How long the published run took (finished_at - started_at); 0 without a run."""
    row = db.execute(
        "SELECT (epoch_ms(finished_at) - epoch_ms(started_at)) / 1000.0 FROM runs "
        "ORDER BY finished_at DESC LIMIT 1"
    ).fetchone()
    return float(row[0]) if row is not None and row[0] is not None else 0.0


def age_s(finished: datetime | None, now: datetime) -> float | None:
    """Seconds since the publication's analysis finished; None when it has no run."""
    if finished is None:
        return None
    if finished.tzinfo is None:  # DuckDB TIMESTAMP without zone: dgm writes UTC
        finished = finished.replace(tzinfo=UTC)
    return (now - finished).total_seconds()


def verdicts_document(
    rows: list[dict[str, Any]],
    finished: datetime | None,
    stale_after: float,
    now: datetime,
    missing_permissions: list[str],
    missing_capabilities: list[str],
) -> dict[str, Any]:
    """What `dgm verdicts --json` prints and the exporter's /api/v1/verdicts answers;
    `missing_permissions`: the 'cannot see X: missing permission Y' lines;
    `missing_capabilities`: the 'cannot see X on cluster C: the broker (3.6) has no API' lines."""
    age = age_s(finished, now)
    stale = age is not None and age > stale_after
    return {
        "analyzed_at": finished,
        "age_s": age,
        "stale": stale,
        "pipelines": rows,
        "missing_permissions": missing_permissions,
        "missing_capabilities": missing_capabilities,
    }


# Beside each verdict, its consumer group's lag in seconds and pace (its group_status row;
# docs/design.md, "Lag in seconds"): null without a group or before two samples.
_GROUP_PACE = (
    "g.lag_s_end AS consumer_lag_s, g.catching_up AS consumer_catching_up, "
    "g.catch_up_s AS consumer_catch_up_s"
)


def read_verdicts(db: duckdb.DuckDBPyConnection) -> tuple[list[dict[str, Any]], datetime | None]:
    """The verdicts rows by pipeline (every column, as `dgm verdicts --json` and the exporter's
    API show them, with the consumer group's lag in seconds and catch-up estimate, and
    `duplicate_causes`: the sink's extra copies per cause) and when their analysis finished
    (None without a runs row)."""
    cursor = db.execute(
        f"SELECT {', '.join(f'v.{name}' for name in VERDICTS.names)}, {_GROUP_PACE} "
        f"FROM verdicts v LEFT JOIN {GROUP_STATUS.name} g "
        "ON g.group_id = v.consumer_group AND g.topic IS NULL ORDER BY v.pipeline"
    )
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    causes: dict[str, dict[str, int]] = {}
    for pipeline, cause, copies in db.execute(
        f"SELECT pipeline, cause, count(*) FROM {DUPLICATES.name} WHERE is_extra_copy "
        "AND pipeline IS NOT NULL GROUP BY ALL ORDER BY 3 DESC, 2"
    ).fetchall():
        causes.setdefault(pipeline, {})[cause] = copies
    for row in rows:
        row["duplicate_causes"] = causes.get(row["pipeline"], {})
    finished = db.execute("SELECT max(finished_at) FROM runs").fetchone()
    return rows, finished[0] if finished else None
