"""Which cluster dgm talks to: the configured one, else the running embedded broker."""

from __future__ import annotations

from typing import Any

from dgm.config import DgmConfig
from dgm.errors import UserFacingError
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


def pipeline_topics(config: DgmConfig) -> tuple[str, ...]:
    """Every topic a pipeline reads or writes, once, sorted."""
    return tuple(sorted({t for p in config.pipelines for t in (*p.source_topics, *p.sink_topics)}))


def pipeline_groups(config: DgmConfig) -> tuple[str, ...]:
    """Every consumer group a pipeline names, once, sorted."""
    return tuple(sorted({p.consumer_group for p in config.pipelines if p.consumer_group}))
