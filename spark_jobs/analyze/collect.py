"""Every published table out of Spark in one action, so the tables share one plan.

Collected one by one, each table was its own query: the parts several tables read (duplicate
copies, causes, lost ids, metric sums) were computed per table or persisted in between, and
every query paid Spark's per-job overhead (bench/README.md, "Analyze"). Here the tables are
laid side by side in one wide frame — table i's columns renamed `_t<i>_<n>`, every other
table's null — unioned, and turned into Arrow once; Spark plans the shared parts once and
reuses their exchanges. The wide Arrow table is then cut back into one table per name.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_jobs.analyze.frames import union_all

TABLE_TAG = "_table"


def _wide_name(table: int, column: int) -> str:
    return f"_t{table}_{column}"


def collect_tables(frames: Mapping[str, DataFrame]) -> dict[str, pa.Table]:
    """name -> Arrow table of `frames` (name -> DataFrame), computed in one Spark action.

    Each Arrow table has its frame's columns, names and types as `DataFrame.toArrow` gives
    them."""
    names = list(frames)
    if not names:
        return {}
    wide = [
        frame.select(
            F.lit(i).alias(TABLE_TAG),
            *(F.col(f"`{c}`").alias(_wide_name(i, n)) for n, c in enumerate(frame.columns)),
        )
        for i, frame in enumerate(frames.values())
    ]
    first, rest = wide[0], wide[1:]
    together = union_all(rest, first) if rest else first
    arrow = together.toArrow()
    tags = arrow.column(TABLE_TAG)
    collected = {}
    for i, (name, frame) in enumerate(frames.items()):
        rows = arrow.filter(pc.equal(tags, i))
        columns = [_wide_name(i, n) for n in range(len(frame.columns))]
        collected[name] = rows.select(columns).rename_columns(frame.columns)
    return collected
