"""What `dgm watch` publishes: the duplicates it has seen in the pipelines' sink topics, within
seconds of their writing and before an analysis judges them (docs/design.md, "The watch").

One Parquet file, `<state_dir>/watch.parquet`, replaced whole at every publication
(dgm.util.durable.replace_whole; Parquet because it is written up to twice a second: ~3 ms, where
a DuckDB file takes ~50 ms of CPU), read with `read_watch`. Its rows are SEEN_DUPLICATES; the
watch's WatchStatus rides in the file's metadata. The words are docs/design.md's: a row is an
extra copy of a message id, committed in a sink topic, whose first copy the watch had read
too. The analysis's `duplicates` table stays the record of judgement (causes, every copy,
the ids the watch did not hold); the dashboard shows a seen duplicate until an analysis has
published it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

WATCH_FILE = "watch.parquet"
_STATUS_KEY = b"dgm.watch_status"
_TIME = pa.timestamp("us", tz="UTC")

SEEN_DUPLICATES = pa.schema(
    [
        # The pipeline whose sink topic holds the copies, and that topic (qualified
        # '<cluster>/<topic>' off the default cluster, as every published table names it).
        pa.field("pipeline", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        # The duplicated id, found by the pipeline's sink id rule.
        pa.field("message_id", pa.string(), nullable=False),
        # The extra copy: the later of the two by (timestamp, partition, offset), the order of
        # duplicates.copy_number, so it is one of the analysis's extra copies too.
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("timestamp", _TIME),
        # The id's first copy.
        pa.field("first_partition", pa.int32(), nullable=False),
        pa.field("first_offset", pa.int64(), nullable=False),
        pa.field("first_timestamp", _TIME),
        # The extra copy's key as text and its dgm-producer, dgm-seq and dgm-src headers; null
        # when the extra copy is the one read first (its record is no longer at hand).
        pa.field("key", pa.string()),
        pa.field("producer", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("lineage", pa.string()),
        # When the watch read the copy that made the id a duplicate.
        pa.field("seen_at", _TIME, nullable=False),
        # The sink topic's cluster: 'default' or a [clusters.<name>].
        pa.field("cluster", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True)
class WatchStatus:
    """How the watch that wrote the file is doing."""

    started_at: datetime  # when this watch process started
    published_at: datetime  # when the file was written (every few seconds while it runs)
    pipelines: int = 0  # pipelines whose sink topics are read
    partitions: int = 0  # sink partitions read
    records_read: int = 0  # committed records read since it started
    records_behind: int = 0  # between its positions and the high watermarks last seen
    ids_held: int = 0  # ids held to recognise a later copy (at most watch.max_ids)

    def encoded(self) -> bytes:
        values = asdict(self)
        for name in ("started_at", "published_at"):
            values[name] = values[name].isoformat()
        return json.dumps(values).encode()

    @classmethod
    def decoded(cls, raw: bytes) -> WatchStatus:
        values = json.loads(raw)
        for name in ("started_at", "published_at"):
            values[name] = datetime.fromisoformat(values[name])
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})


def watch_path(state_dir: Path) -> Path:
    return Path(state_dir) / WATCH_FILE


def with_status(seen: pa.Table, status: WatchStatus) -> pa.Table:
    """`seen` (SEEN_DUPLICATES rows) carrying `status`, as the file holds them."""
    return seen.cast(SEEN_DUPLICATES).replace_schema_metadata({_STATUS_KEY: status.encoded()})


def read_watch(state_dir: Path) -> tuple[pa.Table, WatchStatus] | None:
    """The seen duplicates and the status of the watch's last file; None when there is none
    or it cannot be read (the watch writes it whole, so that is no file yet, or not ours)."""
    try:
        table = pq.read_table(watch_path(state_dir))
        raw = (table.schema.metadata or {})[_STATUS_KEY]
        return table.cast(SEEN_DUPLICATES), WatchStatus.decoded(raw)
    except (OSError, KeyError, ValueError, TypeError, pa.ArrowException):
        return None
