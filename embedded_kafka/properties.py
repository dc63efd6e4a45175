"""Render a KRaft combined-mode broker's server.properties and log4j2 config (pure functions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class NodePorts:
    node_id: int
    port: int  # PLAINTEXT: what clients bootstrap from
    controller_port: int
    # The FAULT listener binds fault_listen_port but advertises fault_advertised_port, so a
    # client that bootstraps through a proxy on the advertised port keeps talking through it
    # (metadata sends it back to the proxy, not around it).
    fault_listen_port: int
    fault_advertised_port: int
    # A SASL_PLAINTEXT listener's port (embedded_kafka.security); 0 when there is none.
    sasl_port: int = 0


def server_properties(
    node: NodePorts,
    quorum: Sequence[NodePorts],
    data_dir: Path,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    replicas = len(quorum)
    min_isr = 2 if replicas >= 3 else 1
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(
            f"{n.node_id}@{LOOPBACK}:{n.controller_port}" for n in quorum
        ),
        "listeners": (
            f"PLAINTEXT://{LOOPBACK}:{node.port},FAULT://{LOOPBACK}:{node.fault_listen_port},"
            f"CONTROLLER://{LOOPBACK}:{node.controller_port}"
        ),
        "advertised.listeners": (
            f"PLAINTEXT://{LOOPBACK}:{node.port},FAULT://{LOOPBACK}:{node.fault_advertised_port}"
        ),
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,FAULT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        ),
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(min_isr),
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(min_isr),
        # Fewer internal partitions: the first group or transaction on a fresh broker would
        # otherwise wait for 50 partitions to be created.
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "false",
    }
    if node.sasl_port:
        sasl = f"SASL://{LOOPBACK}:{node.sasl_port}"
        props["listeners"] += f",{sasl}"
        props["advertised.listeners"] += f",{sasl}"
        props["listener.security.protocol.map"] += ",SASL:SASL_PLAINTEXT"
    props.update(overrides or {})
    return props


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in props.items())


def log4j2_properties(log_file: Path) -> str:
    """Broker logs go to a size-capped rolling file, never to the terminal that started it."""
    return (
        "status = warn\n"
        "appender.file.type = RollingFile\n"
        "appender.file.name = file\n"
        f"appender.file.fileName = {log_file}\n"
        f"appender.file.filePattern = {log_file}.%i\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
        "appender.file.policies.type = Policies\n"
        "appender.file.policies.size.type = SizeBasedTriggeringPolicy\n"
        "appender.file.policies.size.size = 50MB\n"
        "appender.file.strategy.type = DefaultRolloverStrategy\n"
        "appender.file.strategy.max = 3\n"
        "rootLogger.level = INFO\n"
        "rootLogger.appenderRef.file.ref = file\n"
        "logger.kafka.name = kafka\n"
        "logger.kafka.level = INFO\n"
        "logger.request.name = kafka.request.logger\n"
        "logger.request.level = WARN\n"
    )
