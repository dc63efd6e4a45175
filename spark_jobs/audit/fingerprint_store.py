"""Fingerprints on disk, in batches whose rename is their commit.

`<state_dir>/fingerprints/batch-<13-digit epoch ms>-<6-digit seq>/` holds Spark's Parquet part
files and `_range.json`, the manifest: per topic-partition the offsets [start, end) audited,
the records kept, the offsets skipped (deleted by retention unread) and those before the first
audit's start (`analysis.start`; never audited), the id rule per topic,
created_at. A batch is written into a hidden temp dir (a name starting with '.', which Spark
and this module skip), its files and manifest fsynced, then renamed to its final name.

The audited positions are derived from the manifests of complete batches; there is no other
checkpoint that could drift from them. A job killed at any point has either renamed its
batch (its range is audited, its fingerprints are there) or not (neither), so each range is
audited exactly once. Leftover hidden dirs are removed under the writer lock at the start.

A batch whose manifest or a part file no longer reads (damaged on disk) is moved aside as
`damaged-<name>` under the writer lock; its offsets are then audited again.

Compaction writes one new batch holding the kept fingerprints of the batches it replaces and
their ranges (so the positions survive), listing them in `replaces`; readers ignore a batch a
complete batch replaces, so a crash before the old dirs are gone duplicates nothing.
The fingerprints a re-read found Kafka no longer holds as audited (audit/reread.py) leave
the batches for the `_anomalies` folder of the batch that rewrote them (DISPLACED rows; Spark
skips a folder whose name starts with '_'); every rewrite carries them over, as it carries
fingerprints (retention drops them by the same rule).
File external sinks (SQLite, DuckDB) are snapshots, `external/<pipeline>.parquet`, each
replaced atomically. A JDBC sink's new rows are a batch like a Kafka range's; its manifest's
`external` names, per pipeline, the sink (a hash of what shapes its rows), its topic and the
position read up to (`upto`), so the position commits with the rows (audit/jdbc_audit.py); a
rewrite carries the newest entry of each pipeline over.
Run audit, compact and FingerprintStore.load's reads from one process one after another: a
compaction removes files a lazy DataFrame from an earlier load may still want to read.

`FingerprintStore(state_dir)` is the store (as dgm.contracts.samples.SampleStore is the samples');
what needs no state dir (a Batch, the ranges a rewrite keeps, the compaction slack) stays
a module function.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.fingerprints import DISPLACED as ARROW_DISPLACED
from dgm.contracts.fingerprints import DISPLACED_DIR, FINGERPRINTS_DIR
from dgm.contracts.fingerprints import FINGERPRINT as ARROW_FINGERPRINT
from dgm.contracts.samples import Key
from dgm.util.durable import fsync
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.written import part_files, written
from spark_jobs.schemas import DISPLACED, FINGERPRINT

log = logging.getLogger(__name__)

EXTERNAL_DIR = "external"
MANIFEST = "_range.json"
_BATCH = re.compile(r"batch-(\d{13})-(\d{6})")


@dataclass(frozen=True)
class Batch:
    path: Path
    manifest: dict[str, Any]

    @property
    def ranges(self) -> list[dict[str, Any]]:
        return list(self.manifest["ranges"])

    def min_timestamp(self) -> datetime | None:
        text = self.manifest.get("min_timestamp")
        return datetime.fromisoformat(text) if text else None


class FingerprintStore:
    """The fingerprint batches and external snapshots under one state dir."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.folder = self.state_dir / FINGERPRINTS_DIR
        self.external_dir = self.folder / EXTERNAL_DIR

    @contextmanager
    def writer_lock(self) -> Iterator[None]:
        """One writer of fingerprints at a time (audit, compact); leftovers removed on entry."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self.recover()
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def recover(self) -> list[str]:
        """Remove what a killed writer left: hidden temp/trash dirs and replaced batches.
        Call only under `writer_lock` (another writer's temp dir is not a leftover)."""
        folder = self.folder
        replaced = {n for b in _all_batches(folder) for n in b.manifest.get("replaces", ())}
        removed = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            hidden = path.name.startswith(".") and path.is_dir()
            if hidden or path.name in replaced:
                shutil.rmtree(path)
                removed.append(path.name)
        for path in self.external_dir.glob(".*.tmp"):
            path.unlink()
            removed.append(f"{EXTERNAL_DIR}/{path.name}")
        self.set_aside_damaged()
        return removed

    def damaged_ranges(self) -> dict[str, list[OffsetRange]]:
        """Damaged batch name -> the ranges its manifest names, for those not audited again
        yet (a batch whose manifest does not read cannot be: set_aside_damaged warned)."""
        folder = self.folder
        done = reaudited(self.complete_batches())
        found: dict[str, list[OffsetRange]] = {}
        for path in sorted(folder.glob("damaged-batch-*")) if folder.is_dir() else []:
            name = path.name.removeprefix("damaged-")
            if name in done:
                continue
            try:
                manifest = json.loads((path / MANIFEST).read_text())
            except (OSError, ValueError):
                continue
            found[name] = [
                OffsetRange(r["topic"], r["partition"], r["start"], r["end"])
                for r in manifest["ranges"]
                if r["end"] > r["start"]
            ]
        return found

    def set_aside_damaged(self) -> list[str]:
        """Move batches whose manifest or a Parquet part does not read (damaged on disk) to
        `damaged-<name>`: kept for a look, out of every read. Their ranges are no longer
        audited positions, so the next audit reads them again from Kafka where it still holds
        them. Call under `writer_lock`."""
        folder = self.folder
        moved = []
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            if not _BATCH.fullmatch(path.name) or not (path / MANIFEST).is_file():
                continue
            try:
                json.loads((path / MANIFEST).read_text())
                for part in path.glob("*.parquet"):
                    pq.read_metadata(part)
            except (OSError, ValueError, pa.ArrowException) as error:
                aside = path.with_name(f"damaged-{path.name}")
                os.rename(path, aside)
                fsync(folder)
                log.warning(
                    "fingerprint batch %s is damaged (%s): moved to %s; its offsets are "
                    "audited again from Kafka where Kafka still holds them (not if its "
                    "manifest is lost)",
                    path,
                    error,
                    aside,
                )
                moved.append(path.name)
        return moved

    def complete_batches(self) -> list[Batch]:
        """Committed batches, oldest first, without those a committed compaction replaced."""
        batches = _all_batches(self.folder)
        replaced = {name for b in batches for name in b.manifest.get("replaces", ())}
        return [b for b in batches if b.path.name not in replaced]

    def audited_positions(self) -> dict[Key, int]:
        """Per topic-partition the end of what complete batches have audited, and damaged ones
        whose offsets are audited again apart (damaged_ranges), so they are not read twice."""
        ends: dict[Key, int] = {}
        for batch in self.complete_batches():
            for r in batch.ranges:
                key = (r["topic"], r["partition"])
                ends[key] = max(ends.get(key, r["end"]), r["end"])
        for pending in self.damaged_ranges().values():
            for d in pending:
                ends[d.key] = max(ends.get(d.key, d.end), d.end)
        return ends

    def write_batch(
        self,
        spark: SparkSession,
        frame: DataFrame,
        ranges: Sequence[OffsetRange],
        id_rules: Mapping[str, MessageIdRule],
        replaces: Sequence[str] = (),
        topic_ids: Mapping[str, str] | None = None,
        reaudits: Sequence[str] = (),
        external: Mapping[str, Mapping[str, Any]] | None = None,
        expected: Mapping[str, str] | None = None,
        displaced: DataFrame | None = None,
        rewritten: bool = False,
        files: Sequence[Path] | None = None,
    ) -> Batch:
        """Write `frame` (FINGERPRINT rows of `ranges`, and of the JDBC sinks `external`
        names: pipeline -> {"topic", "sink", "upto"}) as one committed batch; call under
        `writer_lock`. `files`: Parquet part files in this store's folder that hold exactly
        `frame`'s rows, moved into the batch instead of writing it again (audit/scratch.py).
        The manifest counts the records per range (and per external entry) from what was
        written; `expected`: pipeline -> the predicate its source records were marked
        under."""
        folder = self.folder
        temp = folder / f".tmp-{uuid.uuid4().hex}"
        if files is None:
            frame.select(*(f.name for f in FINGERPRINT.fields)).write.parquet(str(temp))
        else:
            temp.mkdir()
            for path in files:
                os.rename(path, temp / path.name)
        manifest = _manifest(temp, ranges, id_rules, replaces, topic_ids, reaudits)
        manifest["expected"] = dict(sorted((expected or {}).items()))
        if displaced is not None:
            aside = temp / DISPLACED_DIR
            displaced.select(*(f.name for f in DISPLACED.fields)).write.parquet(str(aside))
            manifest["displaced"] = spark.read.schema(DISPLACED).parquet(str(aside)).count()
            for path in aside.iterdir():
                fsync(path)
        # Rows other than the replaced batches' own (a re-read's rewrite): readers that keep
        # fingerprints read everything again (audit/kept_fingerprints.py).
        manifest["rewritten"] = rewritten
        if external:
            manifest["external"] = {
                name: {**entry, "records": _records_of(manifest, entry["topic"])}
                for name, entry in sorted(external.items())
            }
        (temp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        for path in temp.iterdir():
            fsync(path)
        fsync(temp)
        final = folder / _next_name(folder)
        os.rename(temp, final)  # the commit
        fsync(folder)
        return Batch(final, manifest)

    def external_snapshots(self) -> list[str]:
        """The paths of the external sinks' snapshots."""
        external = self.external_dir
        return sorted(str(p) for p in external.glob("*.parquet")) if external.is_dir() else []

    def displaced(self) -> pa.Table:
        """Every complete batch's displaced fingerprints (DISPLACED), read on the driver:
        they are few."""
        folders = [b.path / DISPLACED_DIR for b in self.complete_batches()]
        tables = [pq.read_table(f, schema=ARROW_DISPLACED) for f in folders if f.is_dir()]
        return pa.concat_tables(tables) if tables else ARROW_DISPLACED.empty_table()

    def load(self, spark: SparkSession) -> DataFrame:
        """Every complete batch's fingerprints and every external snapshot, FINGERPRINT
        columns."""
        paths = [str(b.path) for b in self.complete_batches()] + self.external_snapshots()
        if not paths:
            return empty_fingerprints(spark)
        return spark.read.schema(FINGERPRINT).parquet(*paths)

    def write_external(self, pipeline: str, table: pa.Table) -> Path:
        """Replace `pipeline`'s external sink snapshot atomically (temp file, fsync, rename).
        `table` has the FINGERPRINT columns; it is cast to ARROW_FINGERPRINT."""
        folder = self.external_dir
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{pipeline}.parquet"
        temp = folder / f".{pipeline}.{uuid.uuid4().hex}.tmp"
        try:
            pq.write_table(table.select(ARROW_FINGERPRINT.names).cast(ARROW_FINGERPRINT), temp)
            fsync(temp)
            os.replace(temp, final)
        finally:
            temp.unlink(missing_ok=True)
        fsync(folder)
        return final

    def remove_external_except(self, pipelines: set[str]) -> list[str]:
        """Drop snapshots of pipelines that no longer have an external sink configured."""
        stale = [p for p in self.external_dir.glob("*.parquet") if p.stem not in pipelines]
        for path in stale:
            path.unlink()
        return [p.stem for p in stale]

    def compact(
        self, spark: SparkSession, retention: timedelta, now: datetime | None = None
    ) -> Batch | None:
        """Drop fingerprints whose Kafka timestamp is older than `retention`: the batches
        holding any older than `retention` plus `compaction_slack` are rewritten as one batch
        keeping the rest and every range (the audited positions). None when nothing is old
        enough. Crash-safe: see the module docstring."""
        cutoff = (now or datetime.now(UTC)) - retention
        due = cutoff - compaction_slack(retention)
        with self.writer_lock():
            batches = self.complete_batches()
            old = [b for b in batches if (t := b.min_timestamp()) is not None and t < due]
            if not old:
                return None
            chosen = old + [b for b in batches if b.manifest["records"] == 0 and b not in old]
            unexpired = F.col("timestamp").isNull() | (F.col("timestamp") >= F.lit(cutoff))
            return self.replace_batches(spark, chosen, unexpired)

    def replace_batches(
        self,
        spark: SparkSession,
        chosen: Sequence[Batch],
        keep: Column | None = None,
        without: Collection[str] = (),
        forget_external: Collection[str] = (),
        rows: DataFrame | None = None,
        ends: Mapping[Key, int] | None = None,
        displaced: DataFrame | None = None,
    ) -> Batch:
        """Rewrite `chosen` as one batch holding their rows that match `keep` (all without
        it), and their ranges, id rules and topic ids except those of the topics `without`,
        and the newest JDBC sink entry of each pipeline but those `forget_external` names;
        then retire them. Call under `writer_lock`. Crash-safe: the new batch lists those it
        replaces. Their displaced fingerprints go with them (those matching `keep`). A
        re-read's rewrite gives the `rows` instead, the partitions whose audited range now
        `ends` earlier, and the `displaced` fingerprints it adds."""
        paths = [str(b.path) for b in chosen]
        rewritten = rows is not None
        if rows is None:
            rows = spark.read.schema(FINGERPRINT).parquet(*paths)
            if keep is not None:
                rows = rows.filter(keep)
        aside = [str(b.path / DISPLACED_DIR) for b in chosen if (b.path / DISPLACED_DIR).is_dir()]
        kept_aside = spark.read.schema(DISPLACED).parquet(*aside) if aside else None
        if kept_aside is not None and keep is not None:
            kept_aside = kept_aside.filter(keep)
        if kept_aside is not None and without:
            kept_aside = kept_aside.filter(~F.col("topic").isin(*sorted(without)))
        if displaced is not None:
            kept_aside = displaced if kept_aside is None else kept_aside.unionByName(displaced)
        ranges = [
            OffsetRange(r.topic, r.partition, r.start, min(r.end, (ends or {}).get(r.key, r.end)),
                        r.skipped, r.before_start)
            for r in merged_ranges(chosen)
            if r.topic not in without
        ]  # fmt: skip
        rules = {
            t: MessageIdRule(**r)
            for b in chosen
            for t, r in b.manifest["id_rules"].items()
            if t not in without
        }
        ids = {t: i for t, i in recorded_topic_ids(chosen).items() if t not in without}
        names = [b.path.name for b in chosen]
        external = {
            name: {k: v for k, v in entry.items() if k != "records"}
            for name, entry in newest_external(chosen).items()
            if name not in forget_external
        }
        expected = {p: e for b in chosen for p, e in b.manifest.get("expected", {}).items()}
        reaudits = sorted(reaudited(chosen))
        batch = self.write_batch(
            spark,
            rows,
            ranges,
            rules,
            names,
            ids,
            reaudits,
            external,
            expected=expected,
            displaced=kept_aside,
            rewritten=rewritten,
        )
        retire(chosen)
        return batch


def _all_batches(folder: Path) -> list[Batch]:
    found = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        manifest = path / MANIFEST
        if _BATCH.fullmatch(path.name) and manifest.is_file():
            try:
                found.append(Batch(path, json.loads(manifest.read_text())))
            except (OSError, ValueError):
                continue  # a damaged manifest: set_aside_damaged moves the batch away
    return found


def newest_external(batches: Sequence[Batch]) -> dict[str, dict[str, Any]]:
    """pipeline -> the JDBC sink entry of the newest of `batches` (oldest first) naming it."""
    found: dict[str, dict[str, Any]] = {}
    for batch in batches:
        found.update(batch.manifest.get("external", {}))
    return found


def _records_of(manifest: Mapping[str, Any], topic: str) -> int:
    return int(manifest["external_records"].get(topic, 0))


def reaudited(batches: Sequence[Batch]) -> set[str]:
    """Names of the damaged batches `batches` audited again."""
    return {name for b in batches for name in b.manifest.get("reaudits", ())}


def _next_name(folder: Path) -> str:
    names = sorted(p.name for p in folder.iterdir() if _BATCH.fullmatch(p.name))
    now_ms, seq = time.time_ns() // 1_000_000, 0
    if names and (last := _BATCH.fullmatch(names[-1])) and int(last[1]) >= now_ms:
        now_ms, seq = int(last[1]), int(last[2]) + 1
    return f"batch-{now_ms:013d}-{seq:06d}"


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _manifest(
    written_to: Path,
    ranges: Sequence[OffsetRange],
    id_rules: Mapping[str, MessageIdRule],
    replaces: Sequence[str],
    topic_ids: Mapping[str, str] | None,
    reaudits: Sequence[str],
) -> dict[str, Any]:
    """The manifest of the rows written to `written_to`, counted from what was written."""
    counted = written(part_files(written_to))
    lows = [s.lowest for s in counted.values() if s.lowest is not None]
    highs = [s.highest for s in counted.values() if s.highest is not None]
    return {
        "version": 1,
        "created_at": datetime.now(UTC).isoformat(),
        # Rows per topic that is no Kafka topic (a JDBC sink's `external:` name).
        "external_records": {
            t: s.rows for (t, _), s in sorted(counted.items()) if t.startswith("external:")
        },
        "ranges": [
            {**asdict(r), "records": counted[r.key].rows if r.key in counted else 0} for r in ranges
        ],
        "records": sum(s.rows for s in counted.values()),
        "id_rules": {topic: asdict(rule) for topic, rule in sorted(id_rules.items())},
        "min_timestamp": _iso(min(lows, default=None)),
        "max_timestamp": _iso(max(highs, default=None)),
        "replaces": sorted(replaces),
        # Damaged batches whose offsets this batch audited again (damaged_ranges).
        "reaudits": sorted(reaudits),
        # Kafka's id of each audited topic (spark_jobs.audit.recreated).
        "topic_ids": {
            t: i for t, i in sorted((topic_ids or {}).items()) if t in {r.topic for r in ranges}
        },
    }


def empty_fingerprints(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], FINGERPRINT)


def recorded_topic_ids(batches: Sequence[Batch]) -> dict[str, str]:
    """The topic id each topic had when it was last audited (newest batch wins)."""
    found: dict[str, str] = {}
    for batch in batches:
        found.update(batch.manifest.get("topic_ids", {}))
    return found


def merged_ranges(batches: Sequence[Batch]) -> list[OffsetRange]:
    """One range per topic-partition spanning those of `batches` (what a rewrite keeps)."""
    spans: dict[Key, OffsetRange] = {}
    for batch in batches:
        for r in batch.ranges:
            key, old = (r["topic"], r["partition"]), spans.get((r["topic"], r["partition"]))
            start, end, skipped = r["start"], r["end"], r.get("skipped", 0)
            before = r.get("before_start", 0)
            if old is not None:
                start, end = min(start, old.start), max(end, old.end)
                skipped, before = skipped + old.skipped, before + old.before_start
            spans[key] = OffsetRange(key[0], key[1], start, end, skipped, before)
    return sorted(spans.values(), key=lambda r: r.key)


def compaction_slack(retention: timedelta) -> timedelta:
    """How much older than `retention` a batch's oldest fingerprint may get before its batch
    is rewritten. Without it, the batch a compaction writes starts at the cutoff, so under
    steady traffic it held an expired fingerprint again one cycle later and every cycle
    rewrote everything retained; with it, a rewrite comes at most once per slack."""
    return min(timedelta(hours=1), retention / 24)


def retire(replaced: Sequence[Batch]) -> None:
    """Delete batches a committed batch replaces: each hidden first (atomic), then removed,
    so no half-deleted batch is ever visible (a crash in between: see `recover`)."""
    for b in replaced:
        trash = b.path.with_name(f".trash-{b.path.name}")
        os.rename(b.path, trash)
        shutil.rmtree(trash)
