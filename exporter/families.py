"""Every metric family the exporter serves: name, help and label names, declared once.

Label names follow KMinion's where they mean the same (`topic_name`, `partition_id`,
`group_id`), so dashboards and alerts written for KMinion join on them. Every family is a
gauge. The totals span the fingerprint retention and keep a past problem for as long as it is
retained, so each count is also served for the last closed window
(dgm.contracts.published_views.LAST_CLOSED_WINDOW): a series that falls back to 0 once the problem
stops, which an alert can clear on. The analysis' counts are named by what they count
(`_records`, `_faults`), numbers of seconds end in `_seconds`, fractions in `_ratio`; lags
(in records) keep KMinion's names.
"""

from __future__ import annotations

from dataclasses import dataclass

from dgm.contracts.vocabulary import Achieved, severity_legend


@dataclass(frozen=True)
class Family:
    name: str
    doc: str
    labels: tuple[str, ...] = ()


PIPELINE = ("pipeline",)
# `cluster`: the cluster the topic or group lives on ("default", or a [clusters.<name>]);
# topic_name and group_id are then the names that cluster knows (docs/design.md, "Several
# clusters"), so series join with KMinion's of that cluster.
PARTITION = ("topic_name", "partition_id", "cluster")
GROUP = ("group_id", "cluster")
GROUP_TOPIC = ("group_id", "topic_name", "cluster")
GROUP_PARTITION = ("group_id", "topic_name", "partition_id", "cluster")
TOPIC = ("topic_name", "cluster")

# The exporter's and the monitor's own health: served at every scrape, published or not.
BUILD_INFO = Family(
    "dgm_build_info", "Always 1; the dgm version serving these metrics", ("version",)
)
PUBLICATION_UP = Family(
    "dgm_publication_up",
    "1 when this scrape read the published analysis; 0 when nothing is published yet or the "
    "file cannot be read",
)
LAST_ANALYSIS_TIMESTAMP = Family(
    "dgm_last_analysis_timestamp_seconds",
    "When the published analysis run finished (runs.finished_at), seconds since the epoch",
)
LAST_ANALYSIS_AGE = Family(
    "dgm_last_analysis_age_seconds", "Seconds from runs.finished_at to this scrape"
)
LAST_ANALYSIS_DURATION = Family(
    "dgm_last_analysis_duration_seconds",
    "How long the published analysis run took (runs.finished_at - runs.started_at)",
)
STALE_AFTER = Family(
    "dgm_analysis_stale_after_seconds",
    "Age of the last analysis beyond which dgm calls the publication stale: max(3 x "
    "(analysis.interval_s + the published run's duration), 60), as `dgm verdicts` and the "
    "dashboard judge it",
)
LAST_SAMPLE_TIMESTAMP = Family(
    "dgm_last_sample_timestamp_seconds",
    "When the collectors wrote their newest offsets sample, seconds since the epoch",
)
LAST_SAMPLE_AGE = Family(
    "dgm_last_sample_age_seconds", "Seconds from the collectors' newest offsets sample to now"
)
SCRAPE_DURATION = Family(
    "dgm_scrape_duration_seconds", "Seconds this scrape spent reading the published analysis"
)
HEALTH = (
    BUILD_INFO,
    PUBLICATION_UP,
    LAST_ANALYSIS_TIMESTAMP,
    LAST_ANALYSIS_AGE,
    LAST_ANALYSIS_DURATION,
    STALE_AFTER,
    LAST_SAMPLE_TIMESTAMP,
    LAST_SAMPLE_AGE,
    SCRAPE_DURATION,
)

LAST_WINDOW_START = Family(
    "dgm_last_window_start_timestamp_seconds",
    "Start of the last closed window, which every _last_window_ series counts (it ended "
    "before the published run's newest sample), seconds since the epoch",
)

# Per pipeline, cumulative over the retention (the verdicts table).
VERDICT_INFO = Family(
    "dgm_pipeline_verdict_info",
    "Always 1; the pipeline's declared and achieved semantic, evidence, consumer group and "
    "the clusters of its source and sink",
    ("pipeline", "declared", "achieved", "evidence", "group_id", "source_cluster", "sink_cluster"),
)
MEETS_DECLARED = Family(
    "dgm_pipeline_meets_declared",
    "1 when the achieved semantic is at least as strong as the declared one, 0 when it "
    f"violates it; absent with {Achieved.INSUFFICIENT_EVIDENCE}",
    PIPELINE,
)

# (name after the prefix, column of verdicts and of last_window_pipelines, help).
_PIPELINE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("checked_records", "records_checked", "Source records whose fate is known"),
    ("duplicate_records", "duplicate_copies", "Extra sink copies (upstream excluded)"),
    ("duplicate_ratio", "duplicate_rate", "duplicate records / distinct sink ids"),
    ("lost_records", "lost", "Lost ids (never reached the sink, or sequence gaps)"),
    ("loss_ratio", "loss_rate", "lost records / checked records"),
    (
        "delivery_latency_measured_records",
        "latency_measured",
        "Checked records whose delivery latency was measured",
    ),
    *(
        (
            f"{name}_ratio_{end}",
            f"{column}_{end}",
            f"{side} end of the 95% interval of {name} ratio",
        )
        for name, column in (("duplicate", "duplicate_rate"), ("loss", "loss_rate"))
        for end, side in (("low", "Low"), ("high", "High"))
    ),
    (
        "sampled_ids_one_in",
        "sample_one_in",
        "1 in this many message ids is kept and counted (1: every id; docs/design.md, "
        "Sampled pipelines)",
    ),
    (
        "aborted_read_records",
        "aborted_reads",
        "Sink records whose id the source holds only in aborted transactions",
    ),
    (
        "beyond_retention_records",
        "beyond_retention",
        "Source records not judged: missing from the sink but older than the oldest sink "
        "record dgm holds (their copy may have been deleted by retention)",
    ),
    (
        "late_records",
        "late_records",
        "Checked records delivered later than the pipeline's objective: latency_objective "
        "by arrivals, else a deadline claim's max_delay by timestamps (delivered, not lost)",
    ),
    ("observed_faults", "faults_observed", "Faults seen while the checked records flowed"),
    (
        "filtered_records",
        "filtered",
        "Source records the pipeline's expected predicate excludes (never checked)",
    ),
    (
        "filter_undecided_records",
        "filter_undecided",
        "Source records the expected predicate could not evaluate (checked)",
    ),
    (
        "torn_commit_records",
        "torn_commits",
        "Lost records whose sink copy exists only in aborted transactions while the claim "
        "covers them (a transaction protocol failure)",
    ),
    (
        "producer_out_of_order_records",
        "producer_out_of_order",
        "Source records whose dgm-seq is below one their producer session wrote earlier in "
        "the partition (order, beside the verdict)",
    ),
    (
        "sink_out_of_order_records",
        "sink_out_of_order",
        "Sink records whose source offset is below one from the same source partition "
        "earlier in the sink partition (order, beside the verdict)",
    ),
    (
        "truncated_records",
        "truncated_records",
        "Records of its topics audited at an offset a truncated log no longer holds them at",
    ),
    (
        "inconsistent_offsets",
        "inconsistent_offsets",
        "Audited offsets of its topics that hold another id now",
    ),
)
# family -> verdicts column; a null value leaves the pipeline's series out.
PIPELINE_VALUES: tuple[tuple[Family, str], ...] = tuple(
    (Family(f"dgm_pipeline_{name}", f"{doc}, over the retention", PIPELINE), column)
    for name, column, doc in _PIPELINE_COLUMNS
)
# family -> last_window_pipelines column: the same counts in the last closed window (0 when
# nothing fell in it; a ratio without records is left out).
PIPELINE_LAST_WINDOW_VALUES: tuple[tuple[Family, str], ...] = tuple(
    (Family(f"dgm_pipeline_last_window_{name}", f"{doc}, in the last closed window", PIPELINE), c)
    for name, c, doc in _PIPELINE_COLUMNS
)

# Delivery latency quantiles (docs/design.md, "Delivery latency"), Prometheus' summary
# convention: one series per `quantile`, read from the histogram's buckets (4 a doubling).
LATENCY_QUANTILES = (("0.5", "latency_p50_s"), ("0.95", "latency_p95_s"), ("0.99", "latency_p99_s"))
DELIVERY_LATENCY = Family(
    "dgm_pipeline_delivery_latency_seconds",
    "Seconds from a checked source record becoming readable to its first sink copy becoming "
    "readable, over the retention, per quantile",
    ("pipeline", "quantile"),
)
LAST_WINDOW_DELIVERY_LATENCY = Family(
    "dgm_pipeline_last_window_delivery_latency_seconds",
    "The delivery latency of the checked records of the last closed window, per quantile",
    ("pipeline", "quantile"),
)

# Per topic (what the topic holds: topic_windows), over the retention and in the last window.
_TOPIC_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("records", "records", "Committed records"),
    ("duplicate_records", "duplicate_copies", "Extra committed copies of an id"),
    ("duplicate_ratio", "duplicate_rate", "duplicate records / distinct ids"),
    ("unidentified_records", "unidentified", "Committed records without a message id"),
    ("aborted_records", "aborted", "Records of aborted transactions"),
    (
        "out_of_order_records",
        "out_of_order",
        "Committed records out of order: behind a higher dgm-seq of their producer session, or "
        "(a sink) a higher source offset of their source partition",
    ),
    (
        "truncated_records",
        "truncated_records",
        "Records audited at an offset a truncated log no longer holds them at",
    ),
    ("inconsistent_offsets", "inconsistent_offsets", "Audited offsets that hold another id now"),
)
TOPIC_VALUES: tuple[tuple[Family, str], ...] = tuple(
    (Family(f"dgm_topic_{name}", f"{doc}, over the retention", TOPIC), column)
    for name, column, doc in _TOPIC_COLUMNS
)
TOPIC_LAST_WINDOW_VALUES: tuple[tuple[Family, str], ...] = tuple(
    (Family(f"dgm_topic_last_window_{name}", f"{doc}, in the last closed window", TOPIC), c)
    for name, c, doc in _TOPIC_COLUMNS
)

# Per topic at its newest collector sample (partition_offsets), whatever the granularity.
TOPIC_LSO_LAG = Family(
    "dgm_topic_max_lso_lag",
    "High watermark - last stable offset, the largest over the topic's partitions (records)",
    TOPIC,
)
TOPIC_LSO_STUCK = Family(
    "dgm_topic_max_lso_stuck_seconds",
    "Seconds the LSO has not moved with records above it, the longest over the partitions",
    TOPIC,
)
# Per consumer group at its newest sample (group_lag): summed per group and per topic.
GROUP_LAG_FROM_HW = Family(
    "dgm_consumer_group_lag_from_hw",
    "High watermark - committed offset, summed over the group's partitions",
    GROUP,
)
GROUP_LAG_FROM_LSO = Family(
    "dgm_consumer_group_lag_from_lso",
    "LSO - committed offset (transaction-correct), summed over the group's partitions",
    GROUP,
)
TOPIC_LAG_FROM_HW = Family(
    "dgm_consumer_group_topic_lag_from_hw",
    "High watermark - committed offset, summed over the group's partitions of the topic",
    GROUP_TOPIC,
)
TOPIC_LAG_FROM_LSO = Family(
    "dgm_consumer_group_topic_lag_from_lso",
    "LSO - committed offset (transaction-correct), summed over the group's partitions of the topic",
    GROUP_TOPIC,
)
# Lag in seconds at the group's newest sample (group_lag.lag_s; docs/design.md, "Lag in
# seconds"): the oldest uncommitted record's age, so the largest over the partitions, as
# kafka-lag-exporter's kafka_consumergroup_group_max_lag_seconds.
GROUP_MAX_LAG_SECONDS = Family(
    "dgm_consumer_group_max_lag_seconds",
    "Age of the oldest record the group has not committed (from the LSO), the largest over "
    "its partitions",
    GROUP,
)
TOPIC_MAX_LAG_SECONDS = Family(
    "dgm_consumer_group_topic_max_lag_seconds",
    "Age of the oldest record the group has not committed (from the LSO), the largest over "
    "its partitions of the topic",
    GROUP_TOPIC,
)
# Over the group's status window (group_status): the catch-up estimate at the window's rates.
GROUP_CATCH_UP_SECONDS = Family(
    "dgm_consumer_group_catch_up_seconds",
    "Estimated seconds until the group's lag reaches 0 at its recent rates; absent when it "
    "keeps pace or is not catching up",
    GROUP,
)
GROUP_CATCHING_UP = Family(
    "dgm_consumer_group_catching_up",
    "1 when the group commits faster than records arrive or has nothing left, 0 when it is "
    "not catching up",
    GROUP,
)

# Per partition: served with exporter.granularity = "partition" only.
LSO_LAG = Family("dgm_partition_lso_lag", "High watermark - last stable offset", PARTITION)
LSO_STUCK = Family(
    "dgm_partition_lso_stuck_seconds",
    "Seconds the LSO has not moved with records above it",
    PARTITION,
)
PARTITION_LAG_FROM_HW = Family(
    "dgm_consumer_group_topic_partition_lag_from_hw",
    "High watermark - committed offset",
    GROUP_PARTITION,
)
PARTITION_LAG_FROM_LSO = Family(
    "dgm_consumer_group_topic_partition_lag_from_lso",
    "LSO - committed offset (transaction-correct)",
    GROUP_PARTITION,
)
PARTITION_LAG_SECONDS = Family(
    "dgm_consumer_group_topic_partition_lag_seconds",
    "Age of the oldest record the group has not committed on the partition (from the LSO)",
    GROUP_PARTITION,
)
PER_PARTITION = (
    LSO_LAG,
    LSO_STUCK,
    PARTITION_LAG_FROM_HW,
    PARTITION_LAG_FROM_LSO,
    PARTITION_LAG_SECONDS,
)

# Per group, its worst partition's status by Burrow's rules over lag from the LSO
# (group_status; docs/design.md, "Consumer-group status"): the number in one series per group
# (a status change moves its value, so `for:` and range queries see one series), the word in
# an info series beside it.
GROUP_STATUS = Family(
    "dgm_consumer_group_status",
    f"Status by Burrow's rules over lag from the LSO, as its severity: {severity_legend()}",
    GROUP,
)
GROUP_STATUS_INFO = Family(
    "dgm_consumer_group_status_info",
    "Always 1; the group's status by name (the word for dgm_consumer_group_status's value)",
    ("group_id", "status", "cluster"),
)
# Per group at its newest sample (group_lag): what kind of group, in which state. A share
# group's (KIP-932) committed offsets are its start offsets, so its lag families count the
# records it has not finished: in flight or not yet delivered (docs/design.md, "Share groups").
GROUP_INFO = Family(
    "dgm_consumer_group_info",
    "Always 1; the group's type (classic, consumer: KIP-848, share: KIP-932) and state at its "
    "newest sample",
    ("group_id", "type", "state", "cluster"),
)
# A share group's share-partition lag (group_lag.share_lag, KIP-1226): unlike its lag from
# the high watermark, it leaves out the records acknowledged above the start offset.
SHARE_GROUP_LAG = Family(
    "dgm_share_group_lag",
    "Records from a share group's start offsets to the partitions' ends not yet acknowledged "
    "or archived, as the broker counts them (Kafka 4.2+), summed over its partitions",
    GROUP,
)
# Per pipeline and cause (duplicates; docs/design.md, "cause"): a share group's are redelivery.
DUPLICATES_BY_CAUSE = Family(
    "dgm_pipeline_duplicate_records_by_cause",
    "Extra sink copies per cause (aborted read, producer retry, reprocessing, redelivery, "
    "upstream, unknown)",
    ("pipeline", "cause"),
)
# Per topic with open transactions at the last sample (transactions).
OPEN_TRANSACTIONS = Family("dgm_open_transactions", "Open transactions at the last sample", TOPIC)
HANGING_TRANSACTIONS = Family(
    "dgm_hanging_transactions",
    "Open transactions kafka-transactions.sh find-hanging would report",
    TOPIC,
)

PUBLISHED = (
    LAST_WINDOW_START,
    VERDICT_INFO,
    MEETS_DECLARED,
    *(family for family, _ in PIPELINE_VALUES),
    *(family for family, _ in PIPELINE_LAST_WINDOW_VALUES),
    DELIVERY_LATENCY,
    LAST_WINDOW_DELIVERY_LATENCY,
    *(family for family, _ in TOPIC_VALUES),
    *(family for family, _ in TOPIC_LAST_WINDOW_VALUES),
    TOPIC_LSO_LAG,
    TOPIC_LSO_STUCK,
    GROUP_LAG_FROM_HW,
    GROUP_LAG_FROM_LSO,
    TOPIC_LAG_FROM_HW,
    TOPIC_LAG_FROM_LSO,
    GROUP_MAX_LAG_SECONDS,
    TOPIC_MAX_LAG_SECONDS,
    GROUP_CATCH_UP_SECONDS,
    GROUP_CATCHING_UP,
    *PER_PARTITION,
    GROUP_STATUS,
    GROUP_STATUS_INFO,
    GROUP_INFO,
    SHARE_GROUP_LAG,
    DUPLICATES_BY_CAUSE,
    OPEN_TRANSACTIONS,
    HANGING_TRANSACTIONS,
)
FAMILIES = (*HEALTH, *PUBLISHED)


def served_names() -> frozenset[str]:
    """Every metric name a scrape can show."""
    return frozenset(family.name for family in FAMILIES)
