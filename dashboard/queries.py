"""Read-only, cached queries over the published `<state_dir>/dgm.duckdb`
(dgm/contracts/published.py).

`dgm analyze` replaces the file by rename after each run, so every query batch opens it
read-only, reads, and closes it; nothing here holds it open or writes to it. Results are
cached per (path, mtime, size): a new publication is a new key and is read on the next rerun.
The dashboard only reads these tables; it never computes over raw records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import streamlit as st

from dashboard.timerange import TimeRange
from dgm.config.document import DgmConfig
from dgm.config.loader import ENV_CONFIG, load_config
from dgm.contracts.published import PUBLISHED_FILE, TABLES, open_read_only
from dgm.contracts.published_views import MISSING_CAPABILITIES, MISSING_PERMISSIONS, VIEWS
from dgm.contracts.vocabulary import DuplicateCause

CACHE_TTL_S = 300  # the mtime key already catches new publications; this bounds memory
_INTS = {
    pa.int8(): pd.Int64Dtype(),
    pa.int16(): pd.Int64Dtype(),
    pa.int32(): pd.Int64Dtype(),
    pa.int64(): pd.Int64Dtype(),
}


class NoDatabase(Exception):
    """Nothing published yet: `dgm analyze` has not run (or state_dir points elsewhere)."""


class UnreadableDatabase(Exception):
    """The file exists but cannot be read: locked, corrupt, or not dgm's tables."""


@dataclass(frozen=True)
class Source:
    """The published file as one snapshot key: path, mtime and size."""

    path: str
    mtime_ns: int
    size: int


def config() -> DgmConfig:
    """dgm.toml from DGM_CONFIG (set by `dgm dashboard`), else ./dgm.toml, else defaults.

    DGM_STATE_DIR overrides the state directory (load_config applies it).
    """
    return load_config(os.environ.get(ENV_CONFIG) or None)


def database_path() -> Path:
    return Path(config().state_dir) / PUBLISHED_FILE


def source() -> Source:
    """The current snapshot of the published file; NoDatabase if there is none."""
    path = database_path()
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise NoDatabase(str(path)) from None
    except OSError as error:
        raise UnreadableDatabase(f"{path}: {error.strerror}") from None
    return Source(str(path), stat.st_mtime_ns, stat.st_size)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False, max_entries=256)
def _read(
    src: Source, sql: str, params: tuple[object, ...], named: tuple[tuple[str, object], ...]
) -> pd.DataFrame:
    """One query on one snapshot. Exceptions are not cached, so Retry reads the file again."""
    try:
        with open_read_only(Path(src.path)) as con:
            con.execute("SET TimeZone = 'UTC'")
            # A missing table must be an error, not a scan of a Python variable of that name.
            con.execute("SET python_enable_replacements = false")
            args = dict(named) if named else list(params) or None
            table = con.sql(sql, params=args).to_arrow_table()
    except duckdb.ParserException:
        raise  # a bug in the dashboard's SQL, not a problem with the file
    except (duckdb.CatalogException, duckdb.BinderException) as error:
        raise UnreadableDatabase(
            f"{src.path} lacks a table or column the dashboard reads ({error}); "
            "was it written by this version of `dgm analyze`?"
        ) from None
    except (duckdb.Error, OSError) as error:
        raise UnreadableDatabase(f"{src.path}: {error}") from None
    return table.to_pandas(types_mapper=_INTS.get)


def read(sql: str, *params: object, **named: object) -> pd.DataFrame:
    """`sql` with ? parameters (params) or $name parameters (named) on the current snapshot."""
    return _read(source(), sql, params, tuple(sorted(named.items())))


def between(column: str, within: TimeRange | None) -> tuple[str, dict[str, object]]:
    """A SQL condition keeping `column` in [start, end) of the range ($start, $end), or true."""
    if within is None:
        return "true", {}
    return f"{column} >= $start AND {column} < $end", {"start": within.start, "end": within.end}


WITHIN = "{within}"  # where a query keeps its rows in the time range (read_within)


def read_within(sql: str, column: str, within: TimeRange | None, **named: object) -> pd.DataFrame:
    """`sql`, its WITHIN the condition keeping `column` in the range (`between`), with $name
    parameters `named` on the current snapshot."""
    kept, args = between(column, within)
    return read(sql.replace(WITHIN, kept), **named, **args)


def check() -> None:
    """Raise NoDatabase / UnreadableDatabase unless every contract table and view is readable
    (a file published before the views existed fails here, until the next run replaces it)."""
    names = [t.name for t in TABLES] + [v.name for v in VIEWS]
    read(" UNION ALL ".join(f"SELECT '{n}' AS t FROM \"{n}\" WHERE false" for n in names))


def runs() -> pd.DataFrame:
    return read("SELECT * FROM runs ORDER BY finished_at DESC")


def verdicts() -> pd.DataFrame:
    return read("SELECT * FROM verdicts ORDER BY pipeline")


def latency_histogram(pipeline: str, within: TimeRange | None = None) -> pd.DataFrame:
    """The pipeline's delivery-latency buckets summed over the windows in the range."""
    return read_within(
        f"""SELECT low_s, high_s, sum(records) AS records FROM latency_histogram
        WHERE pipeline = $pipeline AND {WITHIN} GROUP BY ALL ORDER BY low_s""",
        "window_start",
        within,
        pipeline=pipeline,
    )


def slowest_late_records(
    pipeline: str, within: TimeRange | None = None, limit: int = 10
) -> pd.DataFrame:
    """The pipeline's late records whose source record lies in the range, slowest first."""
    return read_within(
        f"""SELECT message_id, delay_s, measured_by, topic || '/' || partition || '/' || "offset"
        AS source_record, first_copy, timestamp FROM late_records
        WHERE pipeline = $pipeline AND {WITHIN} ORDER BY delay_s DESC LIMIT {int(limit)}""",
        "timestamp",
        within,
        pipeline=pipeline,
    )


def pipeline_windows(within: TimeRange | None = None, pipeline: str | None = None) -> pd.DataFrame:
    """Windows in the range, of every pipeline or of one."""
    return read_within(
        f"SELECT * FROM pipeline_windows WHERE {WITHIN} "
        "AND ($pipeline IS NULL OR pipeline = $pipeline) ORDER BY pipeline, window_start",
        "window_start",
        within,
        pipeline=pipeline,
    )


def topics() -> list[str]:
    """Every topic any table names, monitored or a pipeline's source or sink."""
    frame = read(
        """SELECT DISTINCT topic FROM (
             SELECT topic FROM topic_windows UNION ALL SELECT topic FROM partition_offsets
             UNION ALL SELECT topic FROM duplicates UNION ALL SELECT topic FROM lost
             UNION ALL SELECT unnest(source_topics) FROM verdicts
             UNION ALL SELECT unnest(sink) FROM verdicts) WHERE topic IS NOT NULL ORDER BY 1"""
    )
    return [str(t) for t in frame["topic"]]


def _of_topic(
    table: str, topic: str, column: str, within: TimeRange | None, order: str
) -> pd.DataFrame:
    """The rows of `table` about `topic` whose `column` is in the range, in `order`."""
    return read_within(
        f"SELECT * FROM {table} WHERE topic = $topic AND {WITHIN} ORDER BY {order}",
        column,
        within,
        topic=topic,
    )


def topic_windows(topic: str, within: TimeRange | None = None) -> pd.DataFrame:
    return _of_topic("topic_window_series", topic, "window_start", within, "window_start")


def topic_totals() -> pd.DataFrame:
    """Every topic's counts over the retention (the cumulative_topics view)."""
    return read("SELECT * FROM cumulative_topics ORDER BY topic")


_PIPELINES_OF = (
    "SELECT pipeline FROM verdicts WHERE list_contains(source_topics, $topic) "
    "OR list_contains(sink, $topic)"
)


def loss_windows(topic: str, within: TimeRange | None = None) -> pd.DataFrame:
    """pipeline_windows of the pipelines reading or writing `topic` (loss is per pipeline)."""
    return read_within(
        f"SELECT * FROM pipeline_windows WHERE pipeline IN ({_PIPELINES_OF}) AND {WITHIN} "
        "ORDER BY pipeline, window_start",
        "window_start",
        within,
        topic=topic,
    )


def partition_windows(topic: str, within: TimeRange | None = None) -> pd.DataFrame:
    return _of_topic("partition_windows", topic, "window_start", within, "window_start, partition")


def duplicates(topic: str, within: TimeRange | None = None) -> pd.DataFrame:
    """Every copy of the ids of `topic` with at least one copy in the range."""
    return read_within(
        f"SELECT * FROM duplicates WHERE topic = $topic QUALIFY bool_or({WITHIN}) "
        "OVER (PARTITION BY message_id) ORDER BY message_id, copy_number",
        '"timestamp"',
        within,
        topic=topic,
    )


def lost(topic: str, within: TimeRange | None = None) -> pd.DataFrame:
    """Lost ids read from `topic`, or lost by a pipeline reading or writing it; sequence gaps
    (no timestamp) whatever the range."""
    return read_within(
        f"SELECT * FROM lost WHERE (topic = $topic OR pipeline IN ({_PIPELINES_OF})) "
        f'AND ("timestamp" IS NULL OR {WITHIN}) ORDER BY pipeline, "timestamp" NULLS LAST, seq',
        '"timestamp"',
        within,
        topic=topic,
    )


def out_of_order(topic: str, within: TimeRange | None = None) -> pd.DataFrame:
    """The records of `topic` out of order (producer sessions' or a sink's), in the range."""
    return read_within(
        f'SELECT * FROM out_of_order WHERE topic = $topic AND ("timestamp" IS NULL OR {WITHIN}) '
        'ORDER BY "partition", "offset", pipeline',
        '"timestamp"',
        within,
        topic=topic,
    )


def log_anomalies(topic: str) -> pd.DataFrame:
    """The truncated records and inconsistent offsets the re-reads found in `topic` (over the
    retention: they are few, and each says when it was found)."""
    return read(
        'SELECT * FROM log_anomalies WHERE topic = $topic ORDER BY "partition", "offset", anomaly',
        topic=topic,
    )


def at_newest_sample(table: str) -> str:
    """A SQL condition keeping the rows of `table`'s newest sample: of the whole table, what
    the dashboard shows as "the newest sample" (the latest_… views of dgm.contracts.published_views
    keep each topic's or group's own newest)."""
    return f"sampled_at = (SELECT max(sampled_at) FROM {table})"


def _newest(table: str, order: str) -> pd.DataFrame:
    """The rows of `table`'s newest sample, in `order`."""
    return read(f"SELECT * FROM {table} WHERE {at_newest_sample(table)} ORDER BY {order}")


def latest_offsets() -> pd.DataFrame:
    """partition_offsets at the newest sample."""
    return _newest("partition_offsets", "2, 3")


def partition_offsets(topic: str, within: TimeRange | None = None) -> pd.DataFrame:
    return _of_topic("partition_offsets", topic, "sampled_at", within, "sampled_at, partition")


def group_ids() -> list[str]:
    """Groups, those whose HW lag exceeds their LSO lag most at the newest sample first."""
    frame = read(
        f"""SELECT group_id, sum(lag_from_hw - lag_from_lso)
              FILTER (WHERE {at_newest_sample("group_lag")}) AS gap
            FROM group_lag WHERE group_id IS NOT NULL GROUP BY group_id
            ORDER BY gap DESC NULLS LAST, group_id"""
    )
    return [str(g) for g in frame["group_id"]]


def group_lag(group: str, within: TimeRange | None = None) -> pd.DataFrame:
    return read_within(
        f"SELECT * FROM group_lag WHERE group_id = $group AND {WITHIN} "
        "ORDER BY sampled_at, topic, partition",
        "sampled_at",
        within,
        group=group,
    )


def group_status(group: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """group_status of `group`: its own row (none before two samples), and its partitions."""
    own = read("SELECT * FROM group_status_by_group WHERE group_id = ?", group)
    partitions = read(
        'SELECT * FROM group_status_by_partition WHERE group_id = ? ORDER BY topic, "partition"',
        group,
    )
    return own, partitions


def transactions() -> pd.DataFrame:
    return _newest("transactions", "hanging DESC, age_ms DESC")


def faults(within: TimeRange | None = None) -> pd.DataFrame:
    return read_within(f'SELECT * FROM faults WHERE {WITHIN} ORDER BY "at"', '"at"', within)


def missing_permissions() -> pd.DataFrame:
    """What dgm cannot see now for want of a permission (dgm.contracts.published_views)."""
    return read(f'SELECT * FROM "{MISSING_PERMISSIONS.name}" ORDER BY detail')


def missing_capabilities() -> pd.DataFrame:
    """What the clusters' brokers cannot answer now (dgm.contracts.published_views)."""
    return read(f'SELECT * FROM "{MISSING_CAPABILITIES.name}" ORDER BY detail')


def cluster_summary() -> dict[str, int]:
    """Topics and partitions at the newest offsets sample, groups, open and hanging txns."""
    frame = read(
        f"""SELECT
          (SELECT count(DISTINCT topic) FROM partition_offsets
            WHERE {at_newest_sample("partition_offsets")}) AS topics,
          (SELECT count(*) FROM partition_offsets
            WHERE {at_newest_sample("partition_offsets")}) AS partitions,
          (SELECT count(DISTINCT group_id) FROM group_lag
            WHERE {at_newest_sample("group_lag")}) AS groups,
          (SELECT count(*) FROM transactions
            WHERE {at_newest_sample("transactions")}) AS open_transactions,
          (SELECT count(*) FILTER (WHERE hanging) FROM transactions
            WHERE {at_newest_sample("transactions")}) AS hanging_transactions"""
    )
    return {str(k): int(v) if pd.notna(v) else 0 for k, v in frame.iloc[0].items()}


def duplicates_by_cause(topic: str, within: TimeRange | None = None) -> pd.DataFrame:
    """Extra copies in `topic` per window (analysis.window_s, by the copy's timestamp) and cause."""
    return read_within(
        f"""SELECT time_bucket(to_seconds(coalesce((SELECT max(window_s) FROM runs), 60)),
              "timestamp") AS window_start, cause, count(*) AS extra_copies
            FROM duplicates WHERE topic = $topic AND is_extra_copy AND {WITHIN}
            GROUP BY ALL ORDER BY window_start, cause""",
        '"timestamp"',
        within,
        topic=topic,
    )


def redelivered_copies(group: str) -> pd.DataFrame:
    """Per source partition, the extra copies the pipelines of share group `group` made of
    records the group delivered again (cause redelivery, docs/design.md "Share groups")."""
    return read(
        """SELECT source_topic AS topic, source_partition AS "partition",
                  count(*) AS redelivered_copies
           FROM duplicates
           WHERE is_extra_copy AND cause = ? AND source_partition IS NOT NULL
             AND pipeline IN (SELECT pipeline FROM verdicts WHERE consumer_group = ?)
           GROUP BY ALL""",
        DuplicateCause.REDELIVERY.value,
        group,
    )
