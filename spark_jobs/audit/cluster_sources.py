"""Each topic read from its own cluster (docs/design.md, "Several clusters").

The audit's ranges name topics as dgm identifies them: plain on the default cluster,
'<cluster>/<topic>' on another (dgm.contracts.clusters). `KafkaSources` holds each sampled cluster's
Spark Kafka source options and librdkafka settings, and splits ranges by cluster into the
plain names Kafka knows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from dgm.config.cluster import ClusterConfig
from dgm.config.document import DgmConfig
from dgm.contracts.clusters import DEFAULT_CLUSTER, qualified, split
from dgm.contracts.samples import Key
from spark_jobs.audit.ranges import OffsetRange
from spark_jobs.audit.start import OffsetsForTimes, kafka_offsets_for_times

# Every audit task's consumer waited about the broker's default fetch.max.wait.ms (500 ms)
# for its range, whether or not the range ended at the log end: 36 partitions of ~17 records
# took 10.1 s, with 10 ms 1.4 s (bench/HISTORY.md, "Audit: the broker's fetch wait"). The
# range's records are already on the broker, so a short wait costs nothing in throughput.
# A cluster setting `java_client.fetch.max.wait.ms` still wins.
AUDIT_CLIENT_DEFAULTS = {"kafka.fetch.max.wait.ms": "10"}


def cluster_kafka_options(cluster: ClusterConfig, bootstrap_servers: str) -> dict[str, str]:
    """Spark Kafka source options reaching one cluster. They may hold secrets: never log."""
    java = {f"kafka.{key}": value for key, value in cluster.spark_client().items()}
    return {**AUDIT_CLIENT_DEFAULTS, **java, "kafka.bootstrap.servers": bootstrap_servers}


def kafka_options(config: DgmConfig, bootstrap_servers: str) -> dict[str, str]:
    """Spark Kafka source options reaching the default cluster. They may hold secrets: never
    log."""
    return cluster_kafka_options(config.cluster, bootstrap_servers)


@dataclass(frozen=True)
class KafkaSources:
    """Per cluster name: Spark Kafka source options and librdkafka settings."""

    options: Mapping[str, Mapping[str, str]]
    clients: Mapping[str, Mapping[str, Any]]

    def by_cluster(self, ranges: Iterable[OffsetRange]) -> dict[str, list[OffsetRange]]:
        """`ranges` per cluster, their topics as that cluster names them."""
        found: dict[str, list[OffsetRange]] = {}
        for r in ranges:
            cluster, topic = split(r.topic, self.options)
            found.setdefault(cluster, []).append(replace(r, topic=topic))
        return found

    def offsets_for_times(self) -> OffsetsForTimes:
        """Kafka's offsets-for-times lookup, each partition asked of its own cluster."""

        def lookup(times: Mapping[Key, int]) -> dict[Key, int]:
            by_cluster: dict[str, dict[Key, int]] = {}
            for (topic, partition), ms in times.items():
                cluster, plain = split(topic, self.options)
                by_cluster.setdefault(cluster, {})[(plain, partition)] = ms
            found: dict[Key, int] = {}
            for cluster, asked in by_cluster.items():
                answered = kafka_offsets_for_times(self.clients[cluster])(asked)
                found |= {(qualified(cluster, t), p): o for (t, p), o in answered.items()}
            return found

        return lookup


def kafka_sources(config: DgmConfig, default_servers: str) -> KafkaSources:
    """Every sampled cluster's sources; `default_servers`: the default cluster's bootstrap
    servers as the shell picked them (--bootstrap, DGM_BOOTSTRAP or the embedded broker)."""
    options: dict[str, Mapping[str, str]] = {}
    clients: dict[str, Mapping[str, Any]] = {}
    for name in config.sampled_clusters():
        cluster = config.cluster_config(name)
        servers = default_servers if name == DEFAULT_CLUSTER else cluster.bootstrap_servers
        assert servers is not None  # required by dgm.config.document for a named cluster
        options[name] = cluster_kafka_options(cluster, servers)
        clients[name] = cluster.librdkafka_config(servers)
    return KafkaSources(options, clients)
