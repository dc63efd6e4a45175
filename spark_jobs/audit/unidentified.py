"""Why a batch's registry_field records have no id, counted per topic and reason for the
audit's progress line ("audit: topic T: 3 records unidentified: 2 schema not found, ...").

The reason is not stored in the fingerprints; it is counted while the fingerprints are written,
with Spark's observed metrics (one count_if per topic and reason, evaluated in the write's own
job: no second read of Kafka). The reasons a batch can give are known before the job: the
framing's fixed ones and the lookup reasons of the schemas fetched for it; anything else (a
reason a newer reader adds) is counted as "other".
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from dgm.contracts import registry_framing as framing
from spark_jobs.audit.registry_columns import Schemas

OTHER = "other"
_FIXED = (
    framing.NO_VALUE,
    framing.NOT_FRAMED,
    framing.NO_REGISTRY,
    framing.SCHEMA_UNREADABLE,
    framing.FORMAT_UNSUPPORTED,
    framing.PAYLOAD_UNREADABLE,
    framing.FIELD_MISSING,
    framing.NOT_AN_ID,
    framing.EMPTY_ID,
    framing.SCHEMA_PREFIX + "not fetched",
)


class ReasonCounts:
    """The unidentified records of one observed frame of `topics`, by (topic, reason)."""

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = tuple(topics)
        self._observation: Observation | None = None
        self._names: dict[str, tuple[str, str]] = {}
        self._spark: SparkSession | None = None

    def observe(self, frame: DataFrame, reason: Column, schemas: Schemas) -> DataFrame:
        """`frame` counting `reason` (null for an identified record) as its job runs."""
        reasons = dict.fromkeys((*_FIXED, *(s for s in schemas.values() if isinstance(s, str))))
        exprs: list[Column] = []
        for t, topic in enumerate(self.topics):
            mine = F.col("topic") == F.lit(topic)
            for r, text in enumerate(reasons):
                self._names[f"n_{t}_{r}"] = (topic, text)
                exprs.append(F.count_if(mine & (reason == F.lit(text))).alias(f"n_{t}_{r}"))
            self._names[f"n_{t}_other"] = (topic, OTHER)
            known = reason.isin(*reasons)
            exprs.append(F.count_if(mine & reason.isNotNull() & ~known).alias(f"n_{t}_other"))
        self._spark = frame.sparkSession
        # A name of its own: Spark refuses two live observations of one name.
        self._observation = Observation(f"dgm_unidentified_{uuid.uuid4().hex}")
        return frame.observe(self._observation, *exprs)

    def counts(self) -> Counter[tuple[str, str]]:
        """After the frame's job ran: the non-zero counts by (topic, reason); none when Spark
        posted no metrics for it."""
        if self._observation is None or self._observation._jo is None or self._spark is None:
            return Counter()
        # Observation.get waits for ever when a plan lost its observed node; getOrEmpty (the
        # JVM side's) waits briefly and answers empty, so a count never blocks the audit.
        scala_map = self._observation._jo.getOrEmpty()
        jvm: Any = self._spark._jvm
        found = dict(jvm.scala.jdk.javaapi.CollectionConverters.asJava(scala_map).items())
        return Counter(
            {key: int(found[name]) for name, key in self._names.items() if found.get(name)}
        )


def lines(counts: Counter[tuple[str, str]]) -> list[str]:
    """One progress line per topic with unidentified records, reasons most counted first."""
    by_topic: dict[str, list[tuple[str, int]]] = {}
    for (topic, reason), n in counts.most_common():
        by_topic.setdefault(topic, []).append((reason, n))
    return [
        f"audit: topic {topic}: {sum(n for _, n in found)} records unidentified: "
        + ", ".join(f"{n} {reason}" for reason, n in found)
        for topic, found in sorted(by_topic.items())
    ]
