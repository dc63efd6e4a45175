"""Several Kafka clusters: which cluster a topic or a consumer group lives on.

`[cluster]` is the cluster named `default`; `[clusters.<name>]` adds others. A topic or group
of the default cluster keeps its own name everywhere dgm stores or publishes it; one of another
cluster is identified as `<cluster>/<name>` (a **qualified name**, docs/design.md "Several
clusters"). '/' cannot occur in a Kafka topic name, so a topic's qualified name is never
ambiguous; a consumer group id may hold '/', so a name is read as qualified only when what
precedes its first '/' is a configured cluster's name.
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa
import pyarrow.compute as pc

DEFAULT_CLUSTER = "default"
SEPARATOR = "/"
# External sinks' fingerprint topics ('external:<pipeline>:<table>') live on no cluster.
EXTERNAL_PREFIX = "external:"


def qualified(cluster: str, name: str) -> str:
    """`name` (a topic or a consumer group of `cluster`) as dgm identifies it."""
    return name if cluster == DEFAULT_CLUSTER else f"{cluster}{SEPARATOR}{name}"


def split(name: str, clusters: Collection[str]) -> tuple[str, str]:
    """(cluster, the name on that cluster) of a name as dgm identifies it; `clusters` are the
    configured names of the clusters other than the default one."""
    head, separator, rest = name.partition(SEPARATOR)
    if separator and head != DEFAULT_CLUSTER and head in clusters:
        return head, rest
    return DEFAULT_CLUSTER, name


def cluster_of(name: str | None, clusters: Collection[str]) -> str | None:
    """The cluster a topic or group lives on: the one function the published `cluster`
    columns come from; None for no name and for an external sink's table."""
    if name is None or name.startswith(EXTERNAL_PREFIX):
        return None
    return split(name, clusters)[0]


def cluster_column(names: pa.Array | pa.ChunkedArray, clusters: Collection[str]) -> pa.Array:
    """cluster_of of every name of a column (a published table's topics or groups)."""
    unique = pc.unique(names)
    found = pa.array([cluster_of(n, clusters) for n in unique.to_pylist()], pa.string())
    if isinstance(names, pa.ChunkedArray):
        names = names.combine_chunks()
    return pc.take(found, pc.index_in(names, value_set=unique))
