"""The collectors' samples as Arrow tables on the driver, one per sample kind, and the
published tables that are samples as they are.

Samples are a few rows per partition and collector cycle, far fewer than records: the driver
reads them with pyarrow and no Spark query touches them (each cost ~0.5-2 s per cycle,
bench/HISTORY.md, "The samples on the driver"). Files live in `<state_dir>/samples/<kind>/`
(dgm.contracts.samples), listed by the store: temp files and files a compacted file covers are never
read. `SampleReader` keeps the files it read, so a long-running analysis reads only files
new since its last cycle; what it keeps is a copy of the files, which stay the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dgm.contracts import published as tables
from dgm.contracts.sample_schemas import SCHEMAS
from dgm.contracts.samples import SampleStore, set_aside
from spark_jobs.analyze.publish import conform_arrow

KINDS: tuple[str, ...] = tuple(SCHEMAS)


class SampleReader:
    """Every readable sample of each kind under `state_dir`, reading each file once."""

    def __init__(self, state_dir: Path) -> None:
        self.store = SampleStore(Path(state_dir))
        self._read: dict[Path, pa.Table] = {}

    def read(self, kind: str) -> pa.Table:
        files = []
        for path in self.store.files(kind):
            if path not in self._read:
                try:
                    self._read[path] = self.store.read(kind, [path])
                except FileNotFoundError:
                    continue  # expired or compacted away since it was listed
                except (OSError, pa.ArrowException) as error:
                    set_aside(path, error)  # as SampleStore.readable_files does
                    continue
            files.append(path)
        # Files compacted away or expired leave the listing: forget them.
        listed, folder = set(files), self.store.kind_dir(kind)
        for path in [p for p in self._read if p.parent == folder and p not in listed]:
            del self._read[path]
        chosen = [self._read[p] for p in files]
        return pa.concat_tables(chosen) if chosen else SCHEMAS[kind].empty_table()

    def read_all(self) -> dict[str, pa.Table]:
        return {kind: self.read(kind) for kind in KINDS}


def read_samples(state_dir: Path) -> dict[str, pa.Table]:
    """Sample kind -> table, for every kind dgm.contracts.sample_schemas declares (what `analyze`
    takes as its `samples`)."""
    return SampleReader(state_dir).read_all()


def with_every_kind(samples: Mapping[str, pa.Table]) -> dict[str, pa.Table]:
    """`samples` with an empty table for each kind it lacks."""
    return {k: samples[k] if k in samples else SCHEMAS[k].empty_table() for k in KINDS}


def latest_sample(samples: pa.Table) -> pa.Table:
    """The rows of `samples` (one kind) taken at its newest sampled_at, per cluster (each
    cluster's collector samples on its own clock)."""
    if samples.num_rows == 0:
        return samples
    newest = samples.group_by("cluster_id").aggregate([("sampled_at", "max")])
    newest = newest.rename_columns(
        ["sampled_at" if name == "sampled_at_max" else name for name in newest.column_names]
    )
    joined = samples.join(newest, ["cluster_id", "sampled_at"], join_type="inner")
    return joined.select(samples.column_names)


def last_sample_at(samples: Mapping[str, pa.Table]) -> object:
    """The newest sampled_at over every kind; None without samples."""
    newest = [pc.max(t["sampled_at"]).as_py() for t in samples.values() if t.num_rows]
    return max(newest, default=None)


def sample_tables(samples: Mapping[str, pa.Table]) -> dict[str, pa.Table]:
    """partition_offsets, group_lag, transactions (open ones at the last producers sample) and
    producer_sessions."""
    producers = latest_sample(samples["producers"])
    producers = producers.filter(pc.is_valid(producers["txn_start_offset"]))
    producers = producers.append_column("age_ms", producers["idle_ms"])
    return {
        tables.PARTITION_OFFSETS.name: conform_arrow(samples["offsets"], tables.PARTITION_OFFSETS),
        tables.GROUP_LAG.name: conform_arrow(samples["group_offsets"], tables.GROUP_LAG),
        tables.TRANSACTIONS.name: conform_arrow(producers, tables.TRANSACTIONS),
        tables.PRODUCER_SESSIONS.name: producer_sessions(samples["producers"]),
    }


def producer_sessions(producers: pa.Table) -> pa.Table:
    """One row per partition, producer id and epoch of the producers samples, with the
    first and last sample holding it (tables.PRODUCER_SESSIONS)."""
    keys = ["cluster_id", "topic", "partition", "producer_id", "producer_epoch"]
    found = producers.group_by(keys).aggregate(
        [
            ("sampled_at", "min"),
            ("sampled_at", "max"),
            ("last_sequence", "max"),
            ("last_timestamp", "max"),
            ("transactional_id", "max"),
        ]
    )
    named = {
        "sampled_at_min": "first_seen",
        "sampled_at_max": "last_seen",
        "last_sequence_max": "last_sequence",
        "last_timestamp_max": "last_timestamp",
        "transactional_id_max": "transactional_id",
    }
    found = found.rename_columns([named.get(n, n) for n in found.column_names])
    return conform_arrow(found, tables.PRODUCER_SESSIONS)
