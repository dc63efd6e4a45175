"""The duplicate metrics of spark_jobs.analyze.duplicates, the lost ids of
spark_jobs.analyze.loss and the truncations of spark_jobs.audit.reread and
spark_jobs.analyze.integrity in plain DuckDB SQL, over the same FINGERPRINT rows: an Arrow
table, a pandas frame, or a Parquet file (path or glob).

A test oracle and a benchmark baseline, not a product path. Each query is written from
docs/design.md's definitions on its own terms (grouping and FILTER rather than Spark's joins),
so the differential test compares two readings of the definitions, not one twice.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from typing import Any, TypeAlias

import duckdb
import pandas as pd
import pyarrow as pa

# A table DuckDB can scan, or the path of Parquet fingerprints.
Fingerprints: TypeAlias = pa.Table | pd.DataFrame | str | os.PathLike[str]

# Spark sorts nulls first in ascending order and DuckDB last: say it, so both agree.
_FIRST_COPY_ORDER = 'timestamp ASC NULLS FIRST, "partition", "offset"'

DUPLICATE_COPIES = f"""
WITH identified AS (
    SELECT * FROM fingerprints WHERE committed AND message_id IS NOT NULL
), duplicated AS (
    SELECT topic, message_id, count(*) AS copies
    FROM identified GROUP BY topic, message_id HAVING count(*) > 1
), numbered AS (
    SELECT i.*, d.copies,
           row_number() OVER (PARTITION BY i.topic, i.message_id
                              ORDER BY {_FIRST_COPY_ORDER}) AS copy_number
    FROM identified i JOIN duplicated d USING (topic, message_id)
)
SELECT topic, message_id, copies, copy_number, copy_number > 1 AS is_extra_copy,
       "partition", "offset", timestamp, key, producer, seq, lineage,
       src_topic, src_partition, src_offset
FROM numbered
"""

DUPLICATE_SUMMARY = """
WITH counts AS (
    SELECT topic,
           count(*) FILTER (WHERE committed) AS records,
           count(DISTINCT message_id) FILTER (WHERE committed) AS distinct_ids,
           count(message_id) FILTER (WHERE committed) AS identified,
           count(*) FILTER (WHERE committed AND message_id IS NULL) AS unidentified,
           count(*) FILTER (WHERE NOT committed) AS aborted
    FROM fingerprints GROUP BY topic
)
SELECT topic, records, distinct_ids, identified - distinct_ids AS duplicate_copies,
       CASE WHEN distinct_ids > 0
            THEN (identified - distinct_ids)::DOUBLE / distinct_ids END AS duplicate_rate,
       unidentified, aborted
FROM counts
"""

DUPLICATE_CAUSES = """
WITH sink_ids AS (
    SELECT * FROM sink WHERE committed AND message_id IS NOT NULL
), duplicated AS (
    SELECT topic, message_id, count(*) AS copies
    FROM sink_ids GROUP BY topic, message_id HAVING count(*) > 1
), retried AS (
    SELECT DISTINCT topic, message_id FROM sink_ids
    WHERE producer IS NOT NULL AND seq IS NOT NULL
    GROUP BY topic, message_id, producer, seq HAVING count(*) > 1
), reprocessed AS (
    SELECT DISTINCT topic, message_id FROM sink_ids WHERE lineage IS NOT NULL
    GROUP BY topic, message_id, lineage HAVING count(*) > 1
), in_source AS (
    SELECT message_id,
           count(*) FILTER (WHERE committed) AS committed_copies,
           count(*) FILTER (WHERE NOT committed) AS aborted_copies
    FROM source WHERE message_id IS NOT NULL GROUP BY message_id
), flagged AS (
    SELECT d.topic, d.message_id, d.copies,
           coalesce(s.committed_copies = 0 AND s.aborted_copies > 0, false) AS aborted_read,
           r.message_id IS NOT NULL AS producer_retry,
           p.message_id IS NOT NULL AS reprocessing,
           coalesce(s.committed_copies > 1, false) AS upstream
    FROM duplicated d
    LEFT JOIN retried r USING (topic, message_id)
    LEFT JOIN reprocessed p USING (topic, message_id)
    LEFT JOIN in_source s USING (message_id)
)
SELECT *,
       CASE WHEN aborted_read THEN 'aborted read'
            WHEN producer_retry THEN 'producer retry'
            WHEN reprocessing THEN 'reprocessing'
            WHEN upstream THEN 'upstream'
            ELSE 'unknown' END AS cause
FROM flagged
"""

SEQUENCE_GAPS = """
WITH runs AS (
    SELECT topic, "partition", producer, seq,
           lag(seq) OVER (PARTITION BY topic, "partition", producer ORDER BY seq) AS previous
    FROM fingerprints WHERE producer IS NOT NULL AND seq IS NOT NULL
), bounded AS (
    SELECT topic, "partition", producer, seq,
           CASE WHEN previous IS NOT NULL THEN previous
                WHEN $first_seq IS NOT NULL THEN $first_seq - 1 END AS previous
    FROM runs
)
SELECT topic, "partition", producer, previous + 1 AS first_missing, seq - 1 AS last_missing,
       seq - previous - 1 AS missing
FROM bounded WHERE seq - previous > 1
"""


# Lost ids of one pipeline (spark_jobs.analyze.loss.lost without `pipeline`): `committed` holds the
# group's (topic, partition, committed_offset); with $external the greater of that and the
# sink's own highest src_offset + 1 (the table's rows are its claim). A missing id a Kafka
# sink holds in aborted transactions is a torn commit, its first aborted copy named. Gaps are
# counted from the distinct sequences each session wrote, dated by the earliest record after
# the gap.
# Beyond retention (docs/design.md): a missing record older than the oldest held record of a
# sink partition whose held history starts after offset 0; leading gaps only on source
# partitions held from offset 0.
LOST = """
WITH sink_partitions AS (
    SELECT min("offset") AS first_offset, arg_min(timestamp, "offset") AS first_at
    FROM sink WHERE NOT $external GROUP BY topic, "partition"
), sink_from AS (
    SELECT max(first_at) AS held_from FROM sink_partitions WHERE first_offset > 0
), whole_source AS (
    SELECT topic, "partition" FROM source GROUP BY topic, "partition" HAVING min("offset") = 0
), held AS (
    SELECT src_topic AS topic, src_partition AS "partition", max(src_offset) + 1 AS held
    FROM sink WHERE $external AND committed AND src_offset IS NOT NULL
    GROUP BY src_topic, src_partition
), claimed AS (
    SELECT coalesce(c.topic, h.topic) AS topic,
           coalesce(c."partition", h."partition") AS "partition",
           greatest(c.committed_offset, h.held) AS claimed_offset
    FROM committed c FULL JOIN held h ON c.topic = h.topic AND c."partition" = h."partition"
), checked AS (
    SELECT s.* FROM source s JOIN claimed c ON s.topic = c.topic AND s."partition" = c."partition"
    WHERE s.committed AND s.message_id IS NOT NULL AND s.timestamp < $cutoff
      AND s."offset" < c.claimed_offset
      AND NOT coalesce(list_contains(s.filtered_by, $pipeline), false)
), missing AS (
    SELECT k.*, coalesce(k.timestamp < (SELECT held_from FROM sink_from), false) AS beyond
    FROM checked k
    WHERE NOT EXISTS (
        SELECT 1 FROM sink WHERE sink.committed AND sink.message_id = k.message_id
    )
), aborted_copies AS (
    SELECT message_id,
           first(concat_ws('/', topic, "partition", "offset")
                 ORDER BY topic, "partition", "offset") AS aborted_copy
    FROM sink WHERE NOT $external AND NOT committed AND message_id IS NOT NULL
    GROUP BY message_id
), not_in_sink AS (
    SELECT m.message_id, topic, "partition", "offset", timestamp, producer, seq,
           1::BIGINT AS missing,
           CASE WHEN a.aborted_copy IS NULL THEN 'not in sink' ELSE 'torn commit' END AS cause,
           timestamp AS window_at, a.aborted_copy
    FROM missing m LEFT JOIN aborted_copies a USING (message_id) WHERE NOT beyond
    QUALIFY row_number() OVER (
        PARTITION BY m.message_id
        ORDER BY timestamp ASC NULLS FIRST, topic, "partition", "offset"
    ) = 1
), present AS (
    SELECT topic, "partition", producer, seq, min(timestamp) AS next_at
    FROM source WHERE producer IS NOT NULL AND seq IS NOT NULL
    GROUP BY topic, "partition", producer, seq
), runs AS (
    SELECT *, lag(seq) OVER (PARTITION BY topic, "partition", producer ORDER BY seq) AS previous
    FROM present
), floored AS (
    SELECT r.*, CASE WHEN r.previous IS NOT NULL THEN r.previous
                     WHEN w.topic IS NOT NULL THEN -1 END AS below
    FROM runs r LEFT JOIN whole_source w USING (topic, "partition")
), gaps AS (
    SELECT NULL::VARCHAR AS message_id, topic, "partition", NULL::BIGINT AS "offset",
           NULL::TIMESTAMPTZ AS timestamp, producer, below + 1 AS seq,
           seq - below - 1 AS missing, 'sequence gap' AS cause, next_at AS window_at,
           NULL::VARCHAR AS aborted_copy
    FROM floored WHERE below IS NOT NULL
)
SELECT * FROM not_in_sink
UNION ALL
SELECT * FROM gaps WHERE missing > 0 AND window_at < $cutoff
"""
# Filtered (docs/design.md): committed source records whose filtered_by names the pipeline
# (never checked), and those whose filter_undecided_by does (checked like any record).
FILTERED = """
SELECT count(*) FILTER (WHERE list_contains(filtered_by, $pipeline)) AS filtered,
       count(*) FILTER (WHERE list_contains(filter_undecided_by, $pipeline)) AS filter_undecided
FROM source WHERE committed
"""
# The checked records of LOST's query that are beyond retention, counted.
BEYOND_RETENTION = LOST[: LOST.index("SELECT * FROM not_in_sink")] + (
    "SELECT count(*) AS beyond_retention FROM missing WHERE beyond"
)

# A deadline claim (claim = "deadline"): no claimed offset, a committed identified source
# record is checked once its timestamp is before $deadline (now - max_delay), unless the
# pipeline's predicate filtered it (never expected in the sink: never lost, never late). A
# checked id without a committed sink copy is lost ('not in sink within max_delay', beyond
# retention as in LOST); one whose earliest sink copy is timestamped after its first checked
# record + $max_delay is late. One row per id at its first (missing: first counted) checked
# record; `kind` says lost or late. Sequence gaps stay LOST's (grace cutoff): pass no commits
# there.
DEADLINE = """
WITH sink_partitions AS (
    SELECT min("offset") AS first_offset, arg_min(timestamp, "offset") AS first_at
    FROM sink GROUP BY topic, "partition"
), sink_from AS (
    SELECT max(first_at) AS held_from FROM sink_partitions WHERE first_offset > 0
), checked AS (
    SELECT * FROM source
    WHERE committed AND message_id IS NOT NULL AND timestamp < $deadline
      AND NOT coalesce(list_contains(filtered_by, $pipeline), false)
), copies AS (
    SELECT message_id, min(timestamp) AS first_copy_at
    FROM sink WHERE committed AND message_id IS NOT NULL GROUP BY message_id
), judged AS (
    SELECT k.*, c.message_id IS NULL AS missing, c.first_copy_at,
           coalesce(k.timestamp < (SELECT held_from FROM sink_from), false) AS beyond
    FROM checked k LEFT JOIN copies c ON c.message_id = k.message_id
), firsts AS (
    SELECT *, row_number() OVER (
        PARTITION BY message_id, missing AND NOT beyond
        ORDER BY timestamp ASC NULLS FIRST, topic, "partition", "offset"
    ) AS n
    FROM judged WHERE NOT (missing AND beyond)
)
SELECT CASE WHEN missing THEN 'lost' ELSE 'late' END AS kind, message_id, topic,
       "partition", "offset", timestamp, producer, seq, 1::BIGINT AS missing,
       'not in sink within max_delay' AS cause, timestamp AS window_at,
       NULL::VARCHAR AS aborted_copy
FROM firsts
WHERE n = 1 AND (missing OR first_copy_at > timestamp + $max_delay)
"""
# Records a deadline claim checks, beyond retention excluded (records_checked).
DEADLINE_CHECKED = DEADLINE[: DEADLINE.index("), firsts AS (")] + (
    ") SELECT count(*) AS records_checked FROM judged WHERE NOT (missing AND beyond)"
)


# Records out of order (docs/design.md, "Order, beside the delivery semantic"): in a
# producer session of the source (stream: dgm-producer, position: dgm-seq), or among a sink
# partition's copies of one source partition (stream: 'src_topic/src_partition', position:
# the src_offset), a committed record whose position is below the highest position of its
# stream at a lower offset; with the first offset holding that highest one.
OUT_OF_ORDER = """
WITH streams AS (
    SELECT 'out of order' AS anomaly, topic, "partition", "offset", timestamp, message_id,
           producer AS stream, seq AS position
    FROM source WHERE committed AND producer IS NOT NULL AND seq IS NOT NULL
    UNION ALL
    SELECT 'sink out of order', topic, "partition", "offset", timestamp, message_id,
           src_topic || '/' || src_partition, src_offset
    FROM sink
    WHERE committed AND src_topic IS NOT NULL AND src_partition IS NOT NULL
      AND src_offset IS NOT NULL
), judged AS (
    SELECT *, max(position) OVER (
        PARTITION BY anomaly, topic, "partition", stream ORDER BY "offset"
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS preceded_by
    FROM streams
)
SELECT anomaly, topic, "partition", "offset", timestamp, message_id, stream, position,
       preceded_by,
       (SELECT min(e."offset") FROM streams e
        WHERE e.anomaly = j.anomaly AND e.topic = j.topic AND e."partition" = j."partition"
          AND e.stream = j.stream AND e.position = j.preceded_by
          AND e."offset" < j."offset") AS preceded_at
FROM judged j WHERE position < preceded_by
"""
# Truncations (docs/design.md, "Log integrity") from the records as audited (`audited`), the
# records the partitions hold now (`held`) and each partition's high watermark now (`ends`:
# topic, partition, high_watermark), looking at every audited offset at once: a partition
# diverges at the lowest audited offset at or past its high watermark, or holding another
# record now (another id; without ids, another timestamp or key); from there on, an audited
# record its offset no longer holds is displaced: a truncated record when it was committed,
# an inconsistent offset when another record holds its offset now.
TRUNCATIONS = """
WITH compared AS (
    SELECT a.*, e.high_watermark, h."offset" IS NOT NULL AS there, h.message_id AS now_id,
           h.timestamp AS now_at, h.key AS now_key
    FROM audited a JOIN ends e ON e.topic = a.topic AND e."partition" = a."partition"
    LEFT JOIN held h
      ON h.topic = a.topic AND h."partition" = a."partition" AND h."offset" = a."offset"
), judged AS (
    SELECT *, "offset" >= high_watermark AS gone,
           "offset" < high_watermark AND there AND (
               now_id IS DISTINCT FROM message_id
               OR (message_id IS NULL AND now_id IS NULL
                   AND (now_at IS DISTINCT FROM timestamp OR now_key IS DISTINCT FROM key))
           ) AS changed
    FROM compared
), diverged AS (
    SELECT topic, "partition", min("offset") AS at FROM judged WHERE gone OR changed
    GROUP BY topic, "partition"
), displaced AS (
    SELECT j.* FROM judged j JOIN diverged d ON d.topic = j.topic AND d."partition" = j."partition"
    WHERE j."offset" >= d.at AND (j.gone OR j.changed OR NOT j.there)
)
SELECT 'truncated record' AS anomaly, topic, "partition", "offset", message_id,
       CASE WHEN changed THEN now_id END AS now_message_id, timestamp, producer, seq
FROM displaced WHERE committed
UNION ALL
SELECT 'inconsistent offset', topic, "partition", "offset", message_id, now_id, timestamp,
       producer, seq
FROM displaced WHERE changed
"""
# What truncated records of a pipeline's source (`truncated`: TRUNCATIONS' truncated record
# rows of its source topics) cost it: lost, cause truncation, when older than $cutoff and no
# committed record of its sink as it is now (`sink`) carries the id.
TRUNCATION_LOST = """
SELECT message_id, topic, "partition", "offset", timestamp, producer, seq,
       1::BIGINT AS missing, 'truncation' AS cause
FROM truncated t
WHERE message_id IS NOT NULL AND timestamp < $cutoff
  AND NOT EXISTS (SELECT 1 FROM sink WHERE committed AND sink.message_id = t.message_id)
"""


def _scan(connection: duckdb.DuckDBPyConnection, name: str, data: Fingerprints) -> None:
    if isinstance(data, str | os.PathLike):
        connection.read_parquet(os.fspath(data)).create_view(name)
    else:
        connection.register(name, data)


def query(sql: str, parameters: dict[str, Any] | None = None, **tables: Fingerprints) -> pa.Table:
    """Run `sql` over `tables` (view name → fingerprints) in a fresh in-memory DuckDB."""
    with duckdb.connect() as connection:
        for name, data in tables.items():
            _scan(connection, name, data)
        return connection.sql(sql, params=parameters or None).to_arrow_table()


def duplicate_copies(fingerprints: Fingerprints) -> pa.Table:
    return query(DUPLICATE_COPIES, fingerprints=fingerprints)


def duplicate_summary(fingerprints: Fingerprints) -> pa.Table:
    return query(DUPLICATE_SUMMARY, fingerprints=fingerprints)


def duplicate_causes(
    source_fingerprints: Fingerprints, sink_fingerprints: Fingerprints
) -> pa.Table:
    return query(DUPLICATE_CAUSES, source=source_fingerprints, sink=sink_fingerprints)


def sequence_gaps(fingerprints: Fingerprints, first_seq: int | None = 0) -> pa.Table:
    return query(SEQUENCE_GAPS, {"first_seq": first_seq}, fingerprints=fingerprints)


def lost(
    source_fingerprints: Fingerprints,
    sink_fingerprints: Fingerprints,
    committed: Fingerprints,
    cutoff: datetime,
    external: bool = False,
    pipeline: str = "p",
) -> pa.Table:
    """Lost ids and sequence gaps of one pipeline (named `pipeline`: its filtered source
    records are not checked); `committed` as (topic, partition, committed_offset) rows,
    `cutoff` aware (now - grace)."""
    return query(
        LOST,
        {"cutoff": cutoff, "external": external, "pipeline": pipeline},
        source=source_fingerprints,
        sink=sink_fingerprints,
        committed=committed,
    )


def beyond_retention(
    source_fingerprints: Fingerprints,
    sink_fingerprints: Fingerprints,
    committed: Fingerprints,
    cutoff: datetime,
    external: bool = False,
    pipeline: str = "p",
) -> int:
    """How many checked records of lost()'s pipeline are beyond retention."""
    table = query(
        BEYOND_RETENTION,
        {"cutoff": cutoff, "external": external, "pipeline": pipeline},
        source=source_fingerprints,
        sink=sink_fingerprints,
        committed=committed,
    )
    return int(table.column(0)[0].as_py())


def deadline(
    source_fingerprints: Fingerprints,
    sink_fingerprints: Fingerprints,
    now: datetime,
    max_delay: timedelta,
    pipeline: str = "p",
) -> pa.Table:
    """A deadline claim's lost ids and late records (column `kind`) of one topic pipeline
    (named `pipeline`: its filtered source records are not checked), judged at `now`
    (aware); sequence gaps are lost()'s."""
    return query(
        DEADLINE,
        {"deadline": now - max_delay, "max_delay": max_delay, "pipeline": pipeline},
        source=source_fingerprints,
        sink=sink_fingerprints,
    )


def deadline_checked(
    source_fingerprints: Fingerprints,
    sink_fingerprints: Fingerprints,
    now: datetime,
    max_delay: timedelta,
    pipeline: str = "p",
) -> int:
    """How many source records deadline() checks (beyond retention excluded)."""
    table = query(
        DEADLINE_CHECKED,
        {"deadline": now - max_delay, "pipeline": pipeline},
        source=source_fingerprints,
        sink=sink_fingerprints,
    )
    return int(table.column(0)[0].as_py())


def filtered(source_fingerprints: Fingerprints, pipeline: str = "p") -> tuple[int, int]:
    """(filtered, filter_undecided) committed source records of `pipeline`."""
    row = query(FILTERED, {"pipeline": pipeline}, source=source_fingerprints).to_pylist()[0]
    return int(row["filtered"]), int(row["filter_undecided"])


def out_of_order(source_fingerprints: Fingerprints, sink_fingerprints: Fingerprints) -> pa.Table:
    """The records out of order of a source (producer sessions) and a Kafka sink (copies of
    a source partition), with anomaly, stream, position, preceded_by and preceded_at."""
    return query(OUT_OF_ORDER, source=source_fingerprints, sink=sink_fingerprints)


def truncations(audited: Fingerprints, held: Fingerprints, ends: Fingerprints) -> pa.Table:
    """TRUNCATIONS' anomalies of the partitions `ends` names."""
    return query(TRUNCATIONS, audited=audited, held=held, ends=ends)


def truncation_lost(truncated: Fingerprints, sink: Fingerprints, cutoff: datetime) -> pa.Table:
    """TRUNCATION_LOST's rows: `truncated` (TRUNCATIONS' truncated records of the source
    topics), `sink` the sink as it is now, `cutoff` aware."""
    return query(TRUNCATION_LOST, {"cutoff": cutoff}, truncated=truncated, sink=sink)
