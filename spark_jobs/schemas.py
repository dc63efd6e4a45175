"""Spark schemas of the core's Arrow formats (fingerprints, samples): converted, never restated."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StructField, StructType

from dgm.contracts import fingerprints

# Arrow's timestamp("us", tz="UTC") and ms timestamps both become Spark's TimestampType.


def spark_schema(arrow: pa.Schema) -> StructType:
    """`arrow` as a Spark schema, nullability kept."""
    return StructType(
        [StructField(f.name, from_arrow_type(f.type), f.nullable) for f in arrow]  # type: ignore[no-untyped-call]
    )


FINGERPRINT = spark_schema(fingerprints.FINGERPRINT)
DISPLACED = spark_schema(fingerprints.DISPLACED)
