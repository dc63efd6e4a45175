"""Every metric family the exporter serves: name, help and label names, declared once.

Label names follow KMinion's where they mean the same (`topic_name`, `partition_id`,
`group_id`), so dashboards and alerts written for KMinion join on them. Every family is a
gauge: the published numbers span the fingerprint retention and go down as well as up.
"""

from __future__ import annotations

from dataclasses import dataclass

from dgm.vocabulary import Achieved, severity_legend


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
    LAST_SAMPLE_TIMESTAMP,
    LAST_SAMPLE_AGE,
    SCRAPE_DURATION,
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
# family -> verdicts column; a null value leaves the pipeline's series out.
PIPELINE_VALUES: tuple[tuple[Family, str], ...] = (
    (
        Family("dgm_pipeline_records_checked", "Source records whose fate is known", PIPELINE),
        "records_checked",
    ),
    (
        Family("dgm_pipeline_duplicate_copies", "Extra sink copies (upstream excluded)", PIPELINE),
        "duplicate_copies",
    ),
    (
        Family("dgm_pipeline_duplicate_ratio", "duplicate_copies / distinct sink ids", PIPELINE),
        "duplicate_rate",
    ),
    (
        Family(
            "dgm_pipeline_lost", "Lost ids (never reached the sink, or sequence gaps)", PIPELINE
        ),
        "lost",
    ),
    (Family("dgm_pipeline_loss_ratio", "lost / records_checked", PIPELINE), "loss_rate"),
    (
        Family(
            "dgm_pipeline_aborted_reads",
            "Sink records whose id the source holds only in aborted transactions",
            PIPELINE,
        ),
        "aborted_reads",
    ),
    (
        Family(
            "dgm_pipeline_beyond_retention",
            "Source records not judged: missing from the sink but older than the oldest sink "
            "record dgm holds (their copy may have been deleted by retention)",
            PIPELINE,
        ),
        "beyond_retention",
    ),
    (
        Family(
            "dgm_pipeline_late_records",
            "Deadline claim: checked records whose sink copy came later than max_delay "
            "(delivered, not lost)",
            PIPELINE,
        ),
        "late_records",
    ),
    (
        Family(
            "dgm_pipeline_faults_observed", "Faults seen while the checked records flowed", PIPELINE
        ),
        "faults_observed",
    ),
)

# Per partition at its topic's newest collector sample (partition_offsets).
LSO_LAG = Family("dgm_partition_lso_lag", "High watermark - last stable offset", PARTITION)
LSO_STUCK = Family(
    "dgm_partition_lso_stuck_seconds",
    "Seconds the LSO has not moved with records above it",
    PARTITION,
)
# Per consumer group at its newest sample (group_lag): summed, and per partition.
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
# Per group, its worst partition's status by Burrow's rules over lag from the LSO
# (group_status; docs/design.md, "Consumer-group status").
GROUP_STATUS = Family(
    "dgm_consumer_group_status",
    f"Status by Burrow's rules over lag from the LSO: {severity_legend()} (the status label "
    "names it)",
    ("group_id", "status", "cluster"),
)
# Per topic with open transactions at the last sample (transactions).
OPEN_TRANSACTIONS = Family("dgm_open_transactions", "Open transactions at the last sample", TOPIC)
HANGING_TRANSACTIONS = Family(
    "dgm_hanging_transactions",
    "Open transactions kafka-transactions.sh find-hanging would report",
    TOPIC,
)

PUBLISHED = (
    VERDICT_INFO,
    MEETS_DECLARED,
    *(family for family, _ in PIPELINE_VALUES),
    LSO_LAG,
    LSO_STUCK,
    GROUP_LAG_FROM_HW,
    GROUP_LAG_FROM_LSO,
    PARTITION_LAG_FROM_HW,
    PARTITION_LAG_FROM_LSO,
    GROUP_STATUS,
    OPEN_TRANSACTIONS,
    HANGING_TRANSACTIONS,
)
FAMILIES = (*HEALTH, *PUBLISHED)


def served_names() -> frozenset[str]:
    """Every metric name a scrape can show."""
    return frozenset(family.name for family in FAMILIES)
