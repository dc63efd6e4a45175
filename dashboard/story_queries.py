"""The story of one duplicated id, in one DuckDB query: every copy with its coordinates,
producer and sequence, transaction state, the consumer group's commit around it and the
fault nearest in time. Only ids, keys and coordinates: the published tables hold no payloads.
"""

from __future__ import annotations

import pandas as pd

from dashboard.queries import at_newest_sample, read
from dgm.contracts.vocabulary import DuplicateCause

# dgm-src lineage: source topic/partition/offset (dgm/contracts/message_ids.py's SRC_PATTERN).
_SRC = "^(.+)/([0-9]{1,9})/([0-9]{1,18})$"

_ABORTED_READ = DuplicateCause.ABORTED_READ.value

_STORY = f"""
WITH copy AS MATERIALIZED (
  SELECT d.* EXCLUDE (producer_id, producer_epoch),
    d.producer_id AS batch_producer_id, d.producer_epoch AS batch_producer_epoch,
    -- when the copy became readable where the samples tell it; else its record timestamp
    -- (which Kafka Streams and MirrorMaker 2 copy forward from the source record)
    coalesce(d.arrived_at, d."timestamp") AS seen_at,
    coalesce(d.pipeline, (SELECT min(pipeline) FROM verdicts
      WHERE list_contains(source_topics, d.topic))) AS of_pipeline,
    -- a sink copy's source record is its lineage, else the id join's; a copy in a source
    -- topic is its own.
    CASE WHEN d.pipeline IS NULL THEN d.topic
      ELSE coalesce(nullif(regexp_extract(d.lineage, '{_SRC}', 1), ''), d.source_topic)
      END AS src_topic,
    CASE WHEN d.pipeline IS NULL THEN d."partition"
      ELSE coalesce(TRY_CAST(nullif(regexp_extract(d.lineage, '{_SRC}', 2), '') AS INTEGER),
        d.source_partition) END AS src_partition,
    CASE WHEN d.pipeline IS NULL THEN d."offset"
      ELSE coalesce(TRY_CAST(nullif(regexp_extract(d.lineage, '{_SRC}', 3), '') AS BIGINT),
        d.source_offset) END AS src_offset
  FROM duplicates d WHERE d.topic = $topic AND d.message_id = $id),
copies AS MATERIALIZED (SELECT copy.*, v.consumer_group AS group_id
  FROM copy LEFT JOIN verdicts v ON v.pipeline = copy.of_pipeline),
open_txn AS (SELECT * FROM transactions WHERE {at_newest_sample("transactions")}),
with_txn AS MATERIALIZED (SELECT c.*, t.producer_id, t.producer_epoch, t.transactional_id
  FROM copies c LEFT JOIN open_txn t ON t.topic = c.topic AND t."partition" = c."partition"
    AND t.txn_start_offset <= c."offset"),
-- ASOF joins sort their right side: only the samples of this id's group and partitions.
commits AS MATERIALIZED (SELECT * FROM group_lag WHERE group_id IN (SELECT group_id FROM copies)
  AND topic IN (SELECT src_topic FROM copies)),
offsets AS MATERIALIZED (SELECT * FROM partition_offsets WHERE topic = $topic
  AND "partition" IN (SELECT "partition" FROM copies)),
before AS (SELECT c.copy_number, g.sampled_at AS commit_before_at,
    g.committed_offset AS committed_before, g.group_state AS group_state_before
  FROM with_txn c ASOF LEFT JOIN commits g ON g.group_id = c.group_id
    AND g.topic = c.src_topic AND g."partition" = c.src_partition
    AND g.sampled_at <= c.seen_at),
after AS (SELECT c.copy_number, g.sampled_at AS commit_after_at,
    g.committed_offset AS committed_after, g.group_state AS group_state_after
  FROM with_txn c ASOF LEFT JOIN commits g ON g.group_id = c.group_id
    AND g.topic = c.src_topic AND g."partition" = c.src_partition
    AND g.sampled_at >= c.seen_at),
log AS (SELECT c.copy_number, o.high_watermark, o.lso
  FROM with_txn c ASOF LEFT JOIN offsets o ON o.topic = c.topic
    AND o."partition" = c."partition" AND o.sampled_at <= c.seen_at),
fault AS (SELECT c.copy_number, f."at" AS fault_at, f.event AS fault,
    f.detail AS fault_detail, epoch(f."at") - epoch(c.seen_at) AS fault_after_s
  FROM with_txn c JOIN faults f ON (f.pipeline = c.of_pipeline OR f.group_id = c.group_id
    OR (f.pipeline IS NULL AND f.group_id IS NULL))
  QUALIFY row_number() OVER (PARTITION BY c.copy_number
    ORDER BY abs(epoch(f."at") - epoch(c.seen_at))) = 1)
SELECT c.copy_number, c.copies, c.cause, c.evidence, c."partition", c."offset", c."timestamp",
  c.arrived_at, c.arrival_resolution_s, c."key", c.producer, c.seq,
  coalesce(c.batch_producer_id, c.producer_id) AS producer_id,
  coalesce(c.batch_producer_epoch, c.producer_epoch) AS producer_epoch, c.producer_sequence,
  c.transactional_id,
  CASE WHEN c.producer_id IS NOT NULL THEN 'open at the newest sample'
    WHEN c.cause = '{_ABORTED_READ}' THEN 'committed (its source record: aborted only)'
    ELSE 'committed' END AS transaction_state,
  c.lineage, c.src_topic, c.src_partition, c.src_offset, c.of_pipeline AS pipeline, c.group_id,
  before.commit_before_at, before.committed_before, before.group_state_before,
  after.commit_after_at, after.committed_after, after.group_state_after,
  log.high_watermark, log.lso,
  fault.fault_at, fault.fault, fault.fault_detail, fault.fault_after_s
FROM with_txn c LEFT JOIN before USING (copy_number) LEFT JOIN after USING (copy_number)
  LEFT JOIN log USING (copy_number) LEFT JOIN fault USING (copy_number)
ORDER BY c.copy_number"""


def story(topic: str, message_id: str) -> pd.DataFrame:
    """One row per copy of `message_id` in `topic` (see the module doc); empty if none."""
    return read(_STORY, topic=topic, id=message_id)


def commit_sentence(row: pd.Series) -> str:
    """What the group had committed on the source partition around this copy."""
    if row.get("group_id") is None or pd.isna(row.get("src_partition")):
        return "no consumer group or source partition known for this copy"
    where = f"{row['src_topic']}/{int(row['src_partition'])}"
    parts = []
    for side, at, offset in (
        ("before", row.get("commit_before_at"), row.get("committed_before")),
        ("after", row.get("commit_after_at"), row.get("committed_after")),
    ):
        if at is None or pd.isna(at) or offset is None or pd.isna(offset):
            parts.append(f"no sample {side}")
            continue
        seen = "past" if int(offset) > int(row["src_offset"]) else "not past"
        parts.append(f"{side}: {int(offset):,} at {pd.Timestamp(at):%H:%M:%S} ({seen} the record)")
    return (
        f"group {row['group_id']} on {where} (source offset {int(row['src_offset']):,}): "
        + "; ".join(parts)
    )
