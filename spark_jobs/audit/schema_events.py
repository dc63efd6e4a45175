"""Schema fetch failures as events: the audit's side of "never a crash, never a silent drop".

A batch's schemas are fetched on the driver (registry_columns.batch_schemas); a schema the
registry does not give makes its records unidentified with the reason `schema <reason>`. Here
each such (topic, schema) is also recorded once in the `events` sample kind as
`schema_lookup_failed`, the way the audit records a refused topic (denials.py), and as
`schema_lookup_restored` when a later batch of that topic holds the same schema id and the
fetch succeeds. A restore is told only then: a schema no later record names is never fetched
again, so its failure stays the newest event (nothing claims it was repaired).

Which topics hold a failed schema is asked of Spark only when a batch spans several topics
and something is to be told; the common case (no failure) costs nothing more.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dgm.contracts import registry_framing as framing
from dgm.contracts.clusters import split
from dgm.contracts.registered_schemas import (
    SCHEMA_LOOKUP_FAILED,
    SCHEMA_LOOKUP_RESTORED,
    IdKind,
)
from dgm.contracts.samples import SampleStore
from spark_jobs.audit.registry_columns import KIND, SCHEMA_ID, SchemaKey, Schemas, with_framing

log = logging.getLogger(__name__)

# (topic, id kind, schema id): what one failure and its restore are about.
Subject = tuple[str, str, int]
_SUBJECT = re.compile(r"the schema (\d+) \((content|global) id\) of topic (\S+) from")
_EVENTS = (SCHEMA_LOOKUP_FAILED, SCHEMA_LOOKUP_RESTORED)


def failed_line(subject: Subject, cluster: str, reason: str) -> str:
    topic, kind, schema_id = subject
    return (
        f"cannot read the schema {schema_id} ({kind} id) of topic {topic} "
        f"from the schema registry of cluster {cluster}: {reason}"
    )


def restored_line(subject: Subject, cluster: str) -> str:
    topic, kind, schema_id = subject
    return (
        f"reads the schema {schema_id} ({kind} id) of topic {topic} "
        f"from the schema registry of cluster {cluster} again"
    )


def subject_of(detail: str) -> Subject | None:
    found = _SUBJECT.search(detail)
    return None if found is None else (found[3], found[2], int(found[1]))


class SchemaEvents:
    """One audit run's recorder: the newest schema event per subject is read from the events
    sample once, on the first batch with something to tell, and kept up to date here."""

    def __init__(self, state_dir: Path, clusters: Collection[str]) -> None:
        self._store = SampleStore(state_dir)
        self._clusters = clusters
        self._newest: dict[Subject, str] | None = None

    def told(self, records: DataFrame, topics: Sequence[str], schemas: Schemas | None) -> list[str]:
        """Record the events `schemas` (batch_schemas' answer for `records`, a batch of
        `topics`) call for; their lines, also logged."""
        if not schemas:
            return []
        failed = {
            key: found.removeprefix(framing.SCHEMA_PREFIX)
            for key, found in schemas.items()
            if isinstance(found, str) and found.startswith(framing.SCHEMA_PREFIX)
        }
        fetched = [key for key, found in schemas.items() if not isinstance(found, str)]
        newest = self._newest_events()
        reopen = [
            key for key in fetched
            if any(newest.get((t, *key)) == SCHEMA_LOOKUP_FAILED for t in topics)
        ]  # fmt: skip
        if not failed and not reopen:
            return []
        holders = _holders(records, topics, [*failed, *reopen])
        rows: list[dict[str, Any]] = []
        for topic, kind, schema_id in sorted(holders):
            subject: Subject = (topic, kind, schema_id)
            cluster = split(topic, self._clusters)[0]
            key: SchemaKey = (kind, schema_id)
            if key in failed and newest.get(subject) != SCHEMA_LOOKUP_FAILED:
                event, line = SCHEMA_LOOKUP_FAILED, failed_line(subject, cluster, failed[key])
            elif key not in failed and newest.get(subject) == SCHEMA_LOOKUP_FAILED:
                event, line = SCHEMA_LOOKUP_RESTORED, restored_line(subject, cluster)
            else:
                continue
            newest[subject] = event
            rows.append({"event": event, "detail": line, "topic": topic})
        if rows:
            now, ids = datetime.now(UTC), self._cluster_ids()
            for row in rows:
                row.update(sampled_at=now, cluster_id=ids.get(row["topic"], ids.get("", "")))
                log.warning("audit: %s", row["detail"])
            self._store.write("events", rows)
        return [row["detail"] for row in rows]

    def _newest_events(self) -> dict[Subject, str]:
        if self._newest is None:
            events = self._store.read("events")
            mine = events.filter(pc.is_in(events["event"], pa.array(_EVENTS)))
            self._newest = {}
            for row in mine.sort_by("sampled_at").select(["event", "detail"]).to_pylist():
                subject = subject_of(row["detail"])
                if subject is not None:
                    self._newest[subject] = row["event"]
        return self._newest

    def _cluster_ids(self) -> dict[str, str]:
        """Each sampled topic's cluster id (the newest offsets sample's rows; "" for any):
        events belong to the cluster the topic lives on."""
        latest = self._store.latest("offsets")
        if latest is None:
            return {}
        table = self._store.read("offsets", [latest]).select(["topic", "cluster_id"])
        ids = {str(r["topic"]): str(r["cluster_id"]) for r in table.to_pylist()}
        if table.num_rows:
            ids.setdefault("", str(table["cluster_id"][0]))
        return ids


def _holders(
    records: DataFrame, topics: Sequence[str], keys: list[SchemaKey]
) -> set[tuple[str, IdKind, int]]:
    """The (topic, id kind, schema id) of `keys` the batch's records hold: one topic needs no
    job; several ask Spark which topic holds which (a small job, only when there is news)."""
    if len(topics) == 1:
        return {(topics[0], kind, schema_id) for kind, schema_id in keys}
    wanted = F.lit(False)
    for kind, schema_id in keys:
        wanted = wanted | ((F.col(KIND) == F.lit(kind)) & (F.col(SCHEMA_ID) == F.lit(schema_id)))
    rows = with_framing(records).where(wanted).select("topic", KIND, SCHEMA_ID).distinct()
    return {(row["topic"], row[KIND], row[SCHEMA_ID]) for row in rows.collect()}
