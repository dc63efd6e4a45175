"""The fingerprint: what the audit keeps per Kafka record, and what the analysis reads.

Written by the audit (Spark Parquet batches, and snapshots of external sinks written with
Arrow) under `<state_dir>/fingerprints/`; the words are docs/design.md's. This Arrow schema is
the one definition; Spark's schema is converted from it (spark_jobs.schemas).
"""

from __future__ import annotations

import pyarrow as pa

FINGERPRINTS_DIR = "fingerprints"

FINGERPRINT = pa.schema(
    [
        # Where the record is: the audited topic, its partition and offset.
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        # The record's Kafka timestamp (UTC); orders copies of an id across partitions.
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        # The id the pipeline's MessageIdRule finds; null when it finds none ("unidentified").
        pa.field("message_id", pa.string()),
        # The record key as UTF-8 text, for display only (never used for identity unless the
        # rule says kind=key or hash).
        pa.field("key", pa.string()),
        # dgm-producer: the producer session that stamped the record; null when absent.
        pa.field("producer", pa.string()),
        # dgm-seq: the session's per-partition sequence; null when absent or not a
        # non-negative integer.
        pa.field("seq", pa.int64()),
        # dgm-src as written (topic/partition/offset of the record it was made from); raw so a
        # malformed value is still visible as evidence.
        pa.field("lineage", pa.string()),
        # dgm-src parsed; all three null when it is absent or malformed.
        pa.field("src_topic", pa.string()),
        pa.field("src_partition", pa.int32()),
        pa.field("src_offset", pa.int64()),
        # False for a record only a read_uncommitted consumer sees (an aborted transaction's).
        pa.field("committed", pa.bool_(), nullable=False),
        # Source records: the pipelines whose `expected` predicate is false for the record
        # (filtered: never checked); null when none. Batches written before the column read
        # it as null: no pipeline filtered them.
        pa.field("filtered_by", pa.list_(pa.string())),
        # The pipelines whose predicate is NULL for the record (filter undecided: checked).
        pa.field("filter_undecided_by", pa.list_(pa.string())),
        # When the record became readable to a read_committed consumer (the LSO passed it),
        # interpolated between the collectors' offsets samples around it (docs/design.md, "Lag
        # in seconds"; spark_jobs/audit/arrivals.py). Null when they do not tell: the LSO had
        # passed it at the first sample kept, no sample past it yet, an external sink's row,
        # or a batch written before the column.
        pa.field("arrived_at", pa.timestamp("us", tz="UTC")),
        # The gap between those two samples (µs): arrived_at is exact to within it.
        pa.field("arrival_resolution_us", pa.int64()),
    ]
)

COORDINATES = ("topic", "partition", "offset")

# A fingerprint the re-read found Kafka no longer holds as audited (spark_jobs/audit/reread.py;
# docs/design.md, "Log integrity"): its row as audited, and what the re-read found. Kept
# beside the batch that set it aside, in its `_anomalies` folder.
DISPLACED = pa.schema(
    [
        *FINGERPRINT,
        # Whether another record holds its offset now (an inconsistent offset); false when
        # the offset holds nothing or lies past the partition's high watermark.
        pa.field("overwritten", pa.bool_(), nullable=False),
        # The id of the record its offset holds now; null when none holds it or it has none.
        pa.field("now_message_id", pa.string()),
        # When the re-read found it.
        pa.field("detected_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
DISPLACED_DIR = "_anomalies"
