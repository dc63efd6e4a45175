"""Which cluster dgm talks to: the configured one, else the running embedded broker."""

from __future__ import annotations

from typing import Any

from dgm.config.document import DgmConfig
from dgm.contracts.clusters import DEFAULT_CLUSTER, split
from dgm.util.errors import UserFacingError
from embedded_kafka.cluster import EmbeddedCluster


class NoCluster(UserFacingError):
    pass


def bootstrap_servers(config: DgmConfig, override: str | None = None) -> str:
    """`override` (a --bootstrap flag), else [cluster] bootstrap_servers / DGM_BOOTSTRAP, else
    the embedded cluster started with `dgm broker start` under the same state directory."""
    if override:
        return override
    if config.cluster.bootstrap_servers:
        return config.cluster.bootstrap_servers
    embedded = EmbeddedCluster.running(config.state_dir)
    if embedded is None:
        raise NoCluster(
            f"no Kafka cluster to talk to: dgm.toml sets no [cluster] bootstrap_servers and no "
            f"embedded broker runs under {config.state_dir}. Start one with `dgm broker start`, "
            "or set bootstrap_servers (or DGM_BOOTSTRAP) to your cluster."
        )
    return embedded.bootstrap_servers


def client_config(config: DgmConfig, override: str | None = None, **extra: Any) -> dict[str, Any]:
    """librdkafka settings: bootstrap servers, the passed-through security settings, `extra`."""
    return {**config.cluster.librdkafka_config(bootstrap_servers(config, override)), **extra}


def embedded_cluster(config: DgmConfig, override: str | None = None) -> EmbeddedCluster | None:
    """The running embedded cluster when it is the one `bootstrap_servers` picks (no override,
    no configured cluster); None otherwise. Faults that restart brokers need it."""
    if override or config.cluster.bootstrap_servers:
        return None
    return EmbeddedCluster.running(config.state_dir)


def cluster_servers(config: DgmConfig, cluster: str, override: str | None = None) -> str:
    """The bootstrap servers of `cluster`: the default one's as `bootstrap_servers` picks them
    (`override`, DGM_BOOTSTRAP and the embedded broker are the default cluster's only); another's
    from its [clusters.<name>] table."""
    if cluster == DEFAULT_CLUSTER:
        return bootstrap_servers(config, override)
    servers = config.clusters[cluster].bootstrap_servers
    assert servers is not None  # required by dgm.config.document for a named cluster
    return servers


def cluster_client_config(
    config: DgmConfig, cluster: str, override: str | None = None, **extra: Any
) -> dict[str, Any]:
    """librdkafka settings of `cluster`: its bootstrap servers, its client settings, `extra`."""
    settings = config.cluster_config(cluster)
    return {**settings.librdkafka_config(cluster_servers(config, cluster, override)), **extra}


def default_cluster_servers(config: DgmConfig, override: str | None = None) -> str:
    """The default cluster's bootstrap servers when dgm talks to it; "" when the file names
    only clusters of its own ([clusters.<name>]) and nothing lives on the default one."""
    if DEFAULT_CLUSTER not in config.sampled_clusters():
        return ""
    return bootstrap_servers(config, override)


def monitored_servers(config: DgmConfig) -> str:
    """Every sampled cluster's bootstrap servers, named, for a status line."""
    clusters = config.sampled_clusters()
    if clusters == (DEFAULT_CLUSTER,):
        return bootstrap_servers(config)
    return ", ".join(f"{name} {cluster_servers(config, name)}" for name in clusters)


def pipeline_topics(config: DgmConfig, cluster: str = DEFAULT_CLUSTER) -> tuple[str, ...]:
    """Every topic a pipeline reads or writes on `cluster`, as that cluster names it, once,
    sorted."""
    named = tuple(config.clusters)
    topics = {t for p in config.pipelines for t in (*p.source_topics, *p.sink_topics)}
    return tuple(sorted(plain for on, plain in (split(t, named) for t in topics) if on == cluster))


def pipeline_groups(config: DgmConfig, cluster: str = DEFAULT_CLUSTER) -> tuple[str, ...]:
    """Every consumer group a pipeline names on `cluster` (its source cluster), as that
    cluster names it, once, sorted."""
    named = tuple(config.clusters)
    groups = {p.consumer_group for p in config.pipelines if p.consumer_group}
    return tuple(sorted(plain for on, plain in (split(g, named) for g in groups) if on == cluster))
