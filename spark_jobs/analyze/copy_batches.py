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
        self.known = pd.DataFrame({c: pd.Series(dtype="int64") for c in FOUND}).astype(
            {"topic": object}
        )
        self.asked: set[tuple[str, int, int]] = set()

    def of(self, copies: pd.DataFrame) -> pd.DataFrame:
        """FOUND rows of the `copies` (COORDINATES) whose batch was found; the copies no
        longer asked for are forgotten."""
        wanted = {
            (str(t), int(p), int(o))
            for t, p, o in copies[COORDINATES].itertuples(index=False, name=None)
        }
        new = wanted - self.asked
        if new and self.read is not None:
            topics, partitions, offsets = zip(*sorted(new), strict=True)
            asked = pa.table(
                {
                    "topic": pa.array(topics, pa.string()),
                    "partition": pa.array(partitions, pa.int32()),
                    "offset": pa.array(offsets, pa.int64()),
                }
            )
            found = self.read(asked).to_pandas()
            self.known = pd.concat([self.known, found[FOUND]], ignore_index=True)
            self.asked |= new
        self.asked &= wanted
        keys = pd.MultiIndex.from_frame(self.known[COORDINATES])
        self.known = self.known[keys.isin(list(wanted))].reset_index(drop=True)
        return self.known
