"""Render a broker's server.properties and logging config, per Kafka version and mode (pure
functions): KRaft combined mode (broker and controller in one process), or a broker of a
ZooKeeper ensemble (Kafka 3.x); log4j 2 for Kafka 4, reload4j (log4j 1's format) for Kafka 3."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from embedded_kafka.versions import KafkaRelease

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
    *,
    release: KafkaRelease | None = None,
    zookeeper_connect: str = "",
) -> dict[str, str]:
    """`quorum`: every node of the cluster. In ZooKeeper mode (`release.zookeeper`) the brokers
    register in the ZooKeeper at `zookeeper_connect` and elect their controller there."""
    release = release or KafkaRelease()
    replicas = len(quorum)
    min_isr = 2 if replicas >= 3 else 1
    props = _identity(node, quorum, release, zookeeper_connect)
    props.update(
        {
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
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
        }
    )
    if release.has_share_groups:
        props["share.coordinator.state.topic.num.partitions"] = "1"
        props["share.coordinator.state.topic.replication.factor"] = str(replicas)
        props["share.coordinator.state.topic.min.isr"] = str(min_isr)
    if node.sasl_port:
        sasl = f"SASL://{LOOPBACK}:{node.sasl_port}"
        props["listeners"] += f",{sasl}"
        props["advertised.listeners"] += f",{sasl}"
        props["listener.security.protocol.map"] += ",SASL:SASL_PLAINTEXT"
    props.update(overrides or {})
    return props


def _identity(
    node: NodePorts, quorum: Sequence[NodePorts], release: KafkaRelease, zookeeper_connect: str
) -> dict[str, str]:
    """Who the node is, where it listens and how the cluster finds its controller."""
    client_listeners = (
        f"PLAINTEXT://{LOOPBACK}:{node.port},FAULT://{LOOPBACK}:{node.fault_listen_port}"
    )
    common = {
        "advertised.listeners": (
            f"PLAINTEXT://{LOOPBACK}:{node.port},FAULT://{LOOPBACK}:{node.fault_advertised_port}"
        ),
        "inter.broker.listener.name": "PLAINTEXT",
    }
    if release.zookeeper:
        if not zookeeper_connect:
            raise ValueError("a ZooKeeper-mode broker needs zookeeper.connect")
        return {
            "broker.id": str(node.node_id),
            "zookeeper.connect": zookeeper_connect,
            "listeners": client_listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,FAULT:PLAINTEXT",
            **common,
        }
    return {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(
            f"{n.node_id}@{LOOPBACK}:{n.controller_port}" for n in quorum
        ),
        "listeners": f"{client_listeners},CONTROLLER://{LOOPBACK}:{node.controller_port}",
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,FAULT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        ),
        "controller.listener.names": "CONTROLLER",
        **common,
    }


def storage_format_arguments(
    release: KafkaRelease, cluster_id: str, properties_file: Path
) -> list[str]:
    """kafka-storage's `format` arguments for a KRaft node (the same flags from 3.x to 4.x:
    the voters are static, in controller.quorum.voters, so 4.x needs no --standalone, which
    3.x does not have); [] in ZooKeeper mode, whose brokers write their own meta.properties."""
    if release.zookeeper:
        return []
    return [
        "format",
        "--ignore-formatted",
        f"--cluster-id={cluster_id}",
        "-c",
        str(properties_file),
    ]


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in props.items())


@dataclass(frozen=True)
class LoggingConfig:
    """A JVM's logging configuration: where it is written, its text, and the -D option that
    points the JVM at it."""

    path: Path
    text: str
    jvm_option: str


def logging_config(release: KafkaRelease, folder: Path, log_file: Path) -> LoggingConfig:
    """Logs go to a size-capped rolling file, never to the terminal that started the JVM."""
    if release.log4j2:
        path = folder / "log4j2.properties"
        return LoggingConfig(
            path, log4j2_properties(log_file), f"-Dlog4j2.configurationFile={path}"
        )
    path = folder / "log4j.properties"
    return LoggingConfig(
        path, reload4j_properties(log_file), f"-Dlog4j.configuration={path.as_uri()}"
    )


def log4j2_properties(log_file: Path) -> str:
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


def reload4j_properties(log_file: Path) -> str:
    """The same as log4j2_properties, in log4j 1's format (Kafka 3.x and its ZooKeeper)."""
    return (
        "log4j.rootLogger=INFO, file\n"
        "log4j.appender.file=org.apache.log4j.RollingFileAppender\n"
        f"log4j.appender.file.File={log_file}\n"
        "log4j.appender.file.MaxFileSize=50MB\n"
        "log4j.appender.file.MaxBackupIndex=3\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
        "log4j.logger.kafka=INFO\n"
        "log4j.logger.kafka.request.logger=WARN\n"
    )
