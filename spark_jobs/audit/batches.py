"""A fingerprint batch and its manifest: what the store (store.py) commits, one folder each.

`batch-<13-digit epoch ms>-<6-digit seq>/` holds Spark's Parquet part files and
`_range.json`, the manifest: per topic-partition the offsets [start, end) audited, the
records kept, the offsets skipped (deleted by retention unread) and those before the first
audit's start (`analysis.start`; never audited), the id rule per topic, created_at; the
batches a rewrite replaces (`replaces`), the damaged ones it audited again (`reaudits`),
Kafka's topic ids, and a JDBC sink's entries (`external`: per pipeline the sink, its topic
and the position read up to). The audited positions are derived from the manifests of
complete batches; there is no other checkpoint that could drift from them.

What needs no state dir stays here: the manifest written from the files a batch holds, and
what a list of batches' manifests says.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.samples import Key
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.written import part_files, written

MANIFEST = "_range.json"
BATCH_NAME = re.compile(r"batch-(\d{13})-(\d{6})")


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


def all_batches(folder: Path) -> list[Batch]:
    """Every batch in `folder` whose manifest reads, oldest first (replaced ones too)."""
    found = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        manifest = path / MANIFEST
        if BATCH_NAME.fullmatch(path.name) and manifest.is_file():
            try:
                found.append(Batch(path, json.loads(manifest.read_text())))
            except (OSError, ValueError):
                continue  # a damaged manifest: set_aside_damaged moves the batch away
    return found


def next_name(folder: Path) -> str:
    """The name of the batch to commit next in `folder`: after every one there."""
    names = sorted(p.name for p in folder.iterdir() if BATCH_NAME.fullmatch(p.name))
    now_ms, seq = time.time_ns() // 1_000_000, 0
    if names and (last := BATCH_NAME.fullmatch(names[-1])) and int(last[1]) >= now_ms:
        now_ms, seq = int(last[1]), int(last[2]) + 1
    return f"batch-{now_ms:013d}-{seq:06d}"


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def new_manifest(
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


def records_of(manifest: Mapping[str, Any], topic: str) -> int:
    """The rows a manifest counts for `topic`, a JDBC sink's `external:` name."""
    return int(manifest["external_records"].get(topic, 0))


def newest_external(batches: Sequence[Batch]) -> dict[str, dict[str, Any]]:
    """pipeline -> the JDBC sink entry of the newest of `batches` (oldest first) naming it."""
    found: dict[str, dict[str, Any]] = {}
    for batch in batches:
        found.update(batch.manifest.get("external", {}))
    return found


def reaudited(batches: Sequence[Batch]) -> set[str]:
    """Names of the damaged batches `batches` audited again."""
    return {name for b in batches for name in b.manifest.get("reaudits", ())}


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
