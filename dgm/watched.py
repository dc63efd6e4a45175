"""What `dgm watch` publishes: the duplicates it has seen in the pipelines' sink topics, within
seconds of their writing and before an analysis judges them (docs/design.md, "The watch").

One DuckDB file, `<state_dir>/watch.duckdb`, replaced whole at every publication
(dgm.durable.replace_whole) and read with dgm.published.open_read_only. The words are
docs/design.md's: a row is an extra copy of a message id, committed in a sink topic, whose
first copy the watch had read too. The analysis's `duplicates` table stays the record of
judgement (causes, every copy, the ids the watch did not hold); the dashboard shows a seen
duplicate until an analysis has published it.
"""

from __future__ import annotations

from pathlib import Path

from dgm.published import Column, Table

WATCH_FILE = "watch.duckdb"


def watch_path(state_dir: Path) -> Path:
    return Path(state_dir) / WATCH_FILE


def _table(name: str, doc: str, *columns: tuple[str, str, str]) -> Table:
    return Table(name, doc, tuple(Column(*c) for c in columns))


SEEN_DUPLICATES = _table(
    "seen_duplicates",
    "Every extra copy the watch has seen (newest first when read through the view below).",
    ("pipeline", "VARCHAR", "pipeline whose sink topic holds the copies"),
    ("topic", "VARCHAR", "the sink topic (qualified '<cluster>/<topic>' off the default one)"),
    ("message_id", "VARCHAR", "the duplicated id, found by the pipeline's sink id rule"),
    ("partition", "INTEGER", "partition of the extra copy"),
    ("offset", "BIGINT", "offset of the extra copy"),
    (
        "timestamp",
        "TIMESTAMPTZ",
        "Kafka timestamp of the extra copy: the later of the two by (timestamp, partition, "
        "offset), the order of duplicates.copy_number",
    ),
    ("first_partition", "INTEGER", "partition of the id's first copy"),
    ("first_offset", "BIGINT", "offset of the id's first copy"),
    ("first_timestamp", "TIMESTAMPTZ", "Kafka timestamp of the id's first copy"),
    ("key", "VARCHAR", "record key of the extra copy as text"),
    ("producer", "VARCHAR", "dgm-producer header of the extra copy"),
    ("seq", "BIGINT", "dgm-seq header of the extra copy"),
    ("lineage", "VARCHAR", "dgm-src header of the extra copy"),
    ("seen_at", "TIMESTAMPTZ", "when the watch read the copy that made the id a duplicate"),
    ("cluster", "VARCHAR", "the cluster of the sink topic ('default' or a [clusters.<name>])"),
)

WATCH_STATUS = _table(
    "watch_status",
    "One row: how the watch that published this file is doing.",
    ("started_at", "TIMESTAMPTZ", "when this watch process started"),
    ("published_at", "TIMESTAMPTZ", "when this file was written (every few seconds)"),
    ("pipelines", "INTEGER", "pipelines whose sink topics are watched"),
    ("partitions", "INTEGER", "sink partitions read"),
    ("records_read", "BIGINT", "committed records read since the watch started"),
    ("records_behind", "BIGINT", "records between the watch's positions and the high watermarks"),
    ("ids_held", "BIGINT", "ids held to recognise a later copy (at most watch.max_ids)"),
)

TABLES = (SEEN_DUPLICATES, WATCH_STATUS)
