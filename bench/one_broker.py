"""What the audit benchmarks run on: a fresh 1-broker embedded Kafka with their topics, and a
Spark session; each stopped when its block ends (the session before the broker, nested)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from embedded_kafka.cluster import DEFAULT_HEAP, EmbeddedCluster


@contextmanager
def one_broker(
    folder: Path, topics: Iterable[str], partitions: int, heap: str = DEFAULT_HEAP
) -> Iterator[str]:
    """A broker started afresh in `folder` (it dies with this process) with `topics` created,
    `partitions` each; its bootstrap servers."""
    cluster = EmbeddedCluster(folder, brokers=1, heap=heap, die_with_parent=True)
    cluster.start(fresh=True)
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        created = admin.create_topics([NewTopic(t, partitions, 1) for t in topics])
        for future in created.values():
            future.result(timeout=60)
        yield cluster.bootstrap_servers
    finally:
        cluster.stop()


@contextmanager
def spark_session(master: str, app_name: str) -> Iterator[Any]:
    """A Spark session as dgm builds one (with the Kafka source), stopped at the end."""
    from spark_jobs.session import build_session

    spark = build_session(master=master, app_name=app_name)
    try:
        yield spark
    finally:
        spark.stop()
