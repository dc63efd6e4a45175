"""The record batch headers of duplicate copies, read once each: a copy's batch never
changes, and the duplicates table keeps its copies from one cycle to the next.

The reading itself is the audit's (spark_jobs/audit/copy_producers.py: it talks to Kafka);
the analysis gets it as a function, so it stays a function of fingerprints and samples when
there is none (a rebuild from files alone reads no batch)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pyarrow as pa

COORDINATES = ["topic", "partition", "offset"]
FOUND = [*COORDINATES, "producer_id", "producer_epoch", "producer_sequence"]
Reader = Callable[[pa.Table], pa.Table]


class CopyBatches:
    """What the batches of the copies asked for say (FOUND), reading each copy once."""

    def __init__(self, read: Reader | None = None) -> None:
        self.read = read
        self.known = _empty(FOUND)
        self.asked = _empty(COORDINATES)  # read already, found or not

    def of(self, copies: pd.DataFrame) -> pd.DataFrame:
        """FOUND rows of the `copies` (COORDINATES) whose batch was found; the copies no
        longer asked for are forgotten. Joins, not sets of tuples: every duplicate copy is
        asked for every cycle (hundreds of thousands at 10M records)."""
        wanted = _coordinates(copies)
        seen = wanted.merge(self.asked, on=COORDINATES, how="left", indicator=True)
        new = seen.loc[seen["_merge"] == "left_only", COORDINATES]
        if len(new) and self.read is not None:
            new = new.sort_values(COORDINATES, ignore_index=True)
            asked = pa.table(
                {
                    "topic": pa.array(new["topic"], pa.string()),
                    "partition": pa.array(new["partition"], pa.int32()),
                    "offset": pa.array(new["offset"], pa.int64()),
                }
            )
            found = _coordinates(self.read(asked).to_pandas(), FOUND)
            self.known = pd.concat([self.known, found], ignore_index=True)
            self.asked = pd.concat([self.asked, new], ignore_index=True)
        self.asked = self.asked.merge(wanted, on=COORDINATES)
        self.known = self.known.merge(wanted, on=COORDINATES)
        return self.known


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c == "topic" else "int64") for c in columns})


def _coordinates(rows: pd.DataFrame, columns: list[str] = COORDINATES) -> pd.DataFrame:
    """`columns` of `rows`, each copy once, typed alike (topic text, the rest int64)."""
    typed = {c: (str if c == "topic" else "int64") for c in COORDINATES}
    return rows[columns].astype(typed).drop_duplicates(COORDINATES, ignore_index=True)
