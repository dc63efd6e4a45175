"""Id-hash sampling in Spark (dgm/contracts/sampling.py says which ids a sample keeps): the audit
keeps only a sampled topic's kept ids, and the analysis restricts every fingerprint it is handed
(external sinks' snapshots among them) to its pipeline's kept ids."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from itertools import chain

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dgm.contracts.sampling import kept_below
from spark_jobs.analysis_input import Fingerprints


def id_hash(message_id: Column) -> Column:
    """The id's sampling hash: xxhash64 of its text, in [0, 2^63) (dgm.contracts.sampling)."""
    return F.shiftrightunsigned(F.xxhash64(message_id), 1)


def record_hash() -> Column:
    """The sampling hash of a fingerprint: its id's; an unidentified record's is its
    coordinates' (unidentified records are sampled at the same share, and counted so)."""
    coordinates = F.concat_ws("/", "topic", F.col("partition").cast("string"),
                              F.col("offset").cast("string"))  # fmt: skip
    return id_hash(F.coalesce(F.col("message_id"), F.concat(F.lit("\0"), coordinates)))


def kept(frame: DataFrame, topic_one_in: Mapping[str, int]) -> DataFrame:
    """The rows of `frame` (with topic, partition, offset, message_id) that their topic's
    sample keeps; a topic not in `topic_one_in` keeps every row."""
    if not topic_one_in:
        return frame
    bounds = F.create_map(
        *chain.from_iterable(
            (F.lit(topic), F.lit(kept_below(n)).cast("bigint")) for topic, n in topic_one_in.items()
        )
    )
    bound = F.try_element_at(bounds, F.col("topic"))
    return frame.where(bound.isNull() | (record_hash() < bound))


def kept_fingerprints(fingerprints: Fingerprints, topic_one_in: Mapping[str, int]) -> Fingerprints:
    """`fingerprints` with every frame restricted to the kept ids (the count then unknown)."""
    if not topic_one_in:
        return fingerprints

    def keep(frame: DataFrame | None) -> DataFrame | None:
        return None if frame is None else kept(frame, topic_one_in)

    return replace(
        fingerprints,
        kept=kept(fingerprints.kept, topic_one_in),
        external=keep(fingerprints.external),
        before=keep(fingerprints.before),
        added=keep(fingerprints.added),
        external_before=keep(fingerprints.external_before),
        count=None,
    )
