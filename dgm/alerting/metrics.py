"""The alert metrics, declared once: their names, what each is measured per, what it means.

A rule's `metric` is one of these names (the config checks it); alerts/metrics.py reads each
from the published tables (its READERS has one reader per name, a test holds the two equal);
the dashboard's Alerts page shows the help texts.
"""

from __future__ import annotations

from dataclasses import dataclass

from dgm.contracts.vocabulary import severity_legend


@dataclass(frozen=True)
class AlertMetric:
    name: str
    # The scope kinds it is measured per; the first is the one a bare scope pattern means.
    # "run" is the published analysis as a whole.
    kinds: tuple[str, ...]
    help: str
    # Read per window: the rule's `window` (cumulative or latest) chooses which.
    windowed: bool = False


METRICS: tuple[AlertMetric, ...] = (
    AlertMetric(
        "duplicate_rate",
        ("pipeline", "topic"),
        "extra copies / distinct ids (a fraction: 0.001 = 0.1%)",
        windowed=True,
    ),
    AlertMetric(
        "loss_rate",
        ("pipeline",),
        "lost / records checked (a fraction: 0.001 = 0.1%)",
        windowed=True,
    ),
    AlertMetric("lost", ("pipeline",), "lost records", windowed=True),
    AlertMetric(
        "truncated_records",
        ("pipeline", "topic"),
        "records audited at an offset a truncated log no longer holds them at (Jepsen: lost-write)",
        windowed=True,
    ),
    AlertMetric(
        "inconsistent_offsets",
        ("pipeline", "topic"),
        "audited offsets that hold another id now (Jepsen: inconsistent-offsets)",
        windowed=True,
    ),
    AlertMetric(
        "aborted_reads",
        ("pipeline",),
        "sink records read from aborted transactions",
        windowed=True,
    ),
    AlertMetric(
        "verdict_violates",
        ("pipeline",),
        "1 when the verdict does not meet the declared guarantee",
        windowed=True,
    ),
    AlertMetric(
        "torn_commits",
        ("pipeline",),
        "lost records whose sink copy exists only in aborted transactions, the claim past them",
        windowed=True,
    ),
    AlertMetric(
        "producer_out_of_order",
        ("pipeline",),
        "source records behind a higher dgm-seq of their producer session (order)",
        windowed=True,
    ),
    AlertMetric(
        "latency_p99",
        ("pipeline",),
        "99th percentile of the delivery latency: seconds from a source record becoming "
        "readable to its first sink copy becoming readable",
        windowed=True,
    ),
    AlertMetric(
        "late_records",
        ("pipeline",),
        "checked records delivered later than the pipeline's objective (latency_objective by "
        "arrivals, else a deadline claim's max_delay by timestamps)",
        windowed=True,
    ),
    AlertMetric(
        "sink_out_of_order",
        ("pipeline",),
        "sink records behind a higher offset of their source partition (order)",
        windowed=True,
    ),
    AlertMetric("lso_lag", ("topic",), "high watermark - LSO, records"),
    AlertMetric("lso_stuck_s", ("topic",), "seconds the LSO has not moved"),
    AlertMetric("hanging_transactions", ("topic",), "hanging transactions"),
    AlertMetric("consumer_lag_from_lso", ("group",), "LSO - committed offset, records"),
    AlertMetric(
        "lag_seconds", ("group",), "age of the oldest record not committed (from the LSO), s"
    ),
    AlertMetric("group_status", ("group",), f"worst partition status: {severity_legend()}"),
    AlertMetric("staleness_s", ("run",), "seconds since the newest sample the analysis read"),
)

BY_NAME: dict[str, AlertMetric] = {metric.name: metric for metric in METRICS}
# metric name -> the scope kinds it is measured per (what the config and the rule form check).
ALERT_METRICS: dict[str, tuple[str, ...]] = {metric.name: metric.kinds for metric in METRICS}
