"""An embedded Apache Kafka cluster on loopback, owned by dgm: any supported Kafka version
(embedded_kafka.versions), in KRaft combined mode or, for 3.x, with a ZooKeeper of its own.

Its description (ports, pids, folders) is kept in `<state_dir>/broker/cluster.json`, so that
`dgm broker start`, `status` and `stop` run as separate commands and tests can attach to it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dgm.util.errors import UserFacingError
from dgm.util.ports import lasting_ports
from embedded_kafka import processes
from embedded_kafka.distribution import (
    BROKER_MAIN,
    STORAGE_TOOL,
    KafkaDistribution,
    resolve_distribution,
)
from embedded_kafka.java import find_java
from embedded_kafka.properties import (
    LOOPBACK,
    NodePorts,
    logging_config,
    render_properties,
    server_properties,
    storage_format_arguments,
)
from embedded_kafka.readiness import cluster_id_of, wait_for_brokers
from embedded_kafka.security import SaslSetup
from embedded_kafka.security import server_properties as sasl_properties
from embedded_kafka.versions import KafkaRelease
from embedded_kafka.zookeeper import ZooKeeperServer

DEFAULT_HEAP = os.environ.get("DGM_BROKER_HEAP", "512m")


class ClusterError(UserFacingError):
    pass


@dataclass
class BrokerNode:
    ports: NodePorts
    folder: Path
    pid: int | None = None
    # Set when this process started the node: its exit is then known without guessing.
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def node_id(self) -> int:
        return self.ports.node_id

    @property
    def properties_file(self) -> Path:
        return self.folder / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.folder / "logs" / "server.log"

    @property
    def marker(self) -> str:
        """What this node's JVM command line, and no other process's, contains."""
        return str(self.properties_file)

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return bool(processes.find_pids(self.marker))


@dataclass
class EmbeddedCluster:
    state_dir: Path
    brokers: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    heap: str = DEFAULT_HEAP
    # True for a cluster owned by one process (a test session): it dies with that process.
    die_with_parent: bool = False
    # A SASL listener and ACLs enforced (embedded_kafka.security); None: PLAINTEXT only.
    sasl: SaslSetup | None = None
    # The Kafka version and mode; a KAFKA_HOME distribution's own version replaces it.
    release: KafkaRelease = field(default_factory=KafkaRelease)
    nodes: list[BrokerNode] = field(default_factory=list)
    zookeeper: ZooKeeperServer | None = None  # in ZooKeeper mode only
    cluster_id: str = ""
    classpath: str = ""

    @property
    def folder(self) -> Path:
        return self.state_dir / "broker"

    @property
    def process_marker(self) -> str:
        """What the command line of each of this cluster's JVMs, and of no other cluster's,
        contains: several clusters run side by side, one state_dir each."""
        return f"{self.folder}{os.sep}"

    @property
    def zookeeper_marker(self) -> str:
        """What the command line of this cluster's ZooKeeper, if it has one, contains."""
        return str(self.folder / "zookeeper" / "zoo.cfg")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{LOOPBACK}:{n.ports.port}" for n in self.nodes)

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL listeners' addresses; "" when the cluster has none."""
        return ",".join(f"{LOOPBACK}:{n.ports.sasl_port}" for n in self.nodes if n.ports.sasl_port)

    @property
    def fault_bootstrap_servers(self) -> str:
        """The FAULT listeners' advertised addresses: where a fault proxy must listen."""
        return ",".join(f"{LOOPBACK}:{n.ports.fault_advertised_port}" for n in self.nodes)

    def node(self, node_id: int) -> BrokerNode:
        for candidate in self.nodes:
            if candidate.node_id == node_id:
                return candidate
        raise ClusterError(f"no broker with node id {node_id} (have {self.node_ids()})")

    def node_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes]

    def running_nodes(self) -> list[BrokerNode]:
        return [n for n in self.nodes if n.alive()]

    # -- lifecycle -----------------------------------------------------------------------------

    def start(
        self,
        *,
        distribution: KafkaDistribution | None = None,
        fresh: bool = False,
        timeout: float = 120.0,
    ) -> None:
        """Format (first time or `fresh`) and start every broker; return once all answer."""
        if self.brokers not in (1, 3):
            raise ClusterError(f"--brokers must be 1 or 3, got {self.brokers}")
        if self.sasl and self.release.zookeeper:
            raise ClusterError("the embedded SASL listener and ACLs need KRaft mode")
        existing = EmbeddedCluster.load(self.state_dir)
        if existing is not None and existing.running_nodes():
            raise ClusterError(
                f"an embedded cluster already runs at {existing.bootstrap_servers} "
                f"(state {self.folder}); stop it first with `dgm broker stop`"
            )
        java = find_java()
        distribution = distribution or resolve_distribution(kafka_version=self.release.version)
        known = distribution.known_version
        if known and known != self.release.version:
            self.release = self.release.with_version(known)  # a KAFKA_HOME of another version
        self.classpath = distribution.classpath
        if existing is not None:
            existing.stop()  # a ZooKeeper or a half-started broker left over holds its data
        reuse = (
            existing is not None
            and (existing.brokers, existing.release) == (self.brokers, self.release)
            and not fresh
        )
        if existing is not None and not reuse:
            shutil.rmtree(self.folder)
        self.cluster_id = existing.cluster_id if reuse and existing else _new_cluster_id()
        self._assign_ports()
        for node in self.nodes:
            self._write_node_files(node)
            if not (node.folder / "data" / "meta.properties").exists():
                self._format(java, node)
        try:
            self._ensure_zookeeper(java)
            for node in self.nodes:
                self._spawn(java, node)
            self.save()
            wait_for_brokers(
                self.bootstrap_servers, set(self.node_ids()), timeout, self._first_death
            )
        except BaseException:
            self.stop()
            raise
        if self.zookeeper is not None:  # the brokers drew the cluster id in ZooKeeper
            self.cluster_id = cluster_id_of(self.bootstrap_servers)
            self.save()

    def stop(self, timeout: float = 45.0) -> list[int]:
        """Stop every broker, then its ZooKeeper if it has one (clean shutdown, SIGKILL after
        `timeout`); idempotent."""
        # Found by command line, not by recorded pid: a half-started or forgotten broker of
        # this cluster is stopped too. The marker ends with a separator, so a second cluster
        # whose path merely starts with this one's folder (state dirs `s` and `s/broker-b`)
        # is left running.
        marker = self.process_marker
        zookeeper = processes.find_pids(self.zookeeper_marker)
        brokers = [pid for pid in processes.find_pids(marker) if pid not in zookeeper]
        stubborn = processes.terminate(brokers, marker, timeout)
        # ZooKeeper last: a broker's clean shutdown goes through it.
        stubborn += processes.terminate(zookeeper, marker, timeout)
        for node in self.nodes:
            if node.process is not None:
                node.process.wait()
            node.pid, node.process = None, None
        if self.zookeeper is not None and self.zookeeper.process is not None:
            self.zookeeper.process.wait()
            self.zookeeper.process = None
        if self.nodes:
            self.save()
        return stubborn

    def stop_broker(self, node_id: int, *, kill: bool = False, timeout: float = 45.0) -> None:
        """Stop one broker: cleanly, or with SIGKILL as a crash would."""
        node = self.node(node_id)
        for pid in processes.find_pids(node.marker):
            if kill:
                processes.kill(pid, node.marker)
            else:
                processes.terminate([pid], node.marker, timeout)
        if node.process is not None:
            node.process.wait()
        node.pid, node.process = None, None
        self.save()

    def start_broker(self, node_id: int, timeout: float = 120.0) -> None:
        node = self.node(node_id)
        if node.alive():
            return
        java = find_java()
        self._ensure_zookeeper(java)
        self._spawn(java, node)
        self.save()
        wait_for_brokers(self.bootstrap_servers, {node_id}, timeout, self._first_death)

    def start_stopped(self, timeout: float = 120.0) -> list[int]:
        """Start every broker that is not running, all at once (after a whole-cluster outage
        no controller quorum forms until enough of them are back); their node ids, once all
        answer."""
        stopped = [node for node in self.nodes if not node.alive()]
        java = find_java()
        self._ensure_zookeeper(java)
        for node in stopped:
            self._spawn(java, node)
        self.save()
        ids = {node.node_id for node in stopped}
        if ids:
            wait_for_brokers(self.bootstrap_servers, ids, timeout, self._first_death)
        return sorted(ids)

    # -- persistence ---------------------------------------------------------------------------

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        description = {
            "brokers": self.brokers,
            "cluster_id": self.cluster_id,
            "kafka_version": self.release.version,
            "mode": self.release.mode,
            "zookeeper_port": self.zookeeper.port if self.zookeeper else 0,
            "classpath": self.classpath,
            "heap": self.heap,
            "overrides": self.overrides,
            "sasl": self.sasl.to_json() if self.sasl else None,
            "bootstrap_servers": self.bootstrap_servers,
            "sasl_bootstrap_servers": self.sasl_bootstrap_servers,
            "fault_bootstrap_servers": self.fault_bootstrap_servers,
            "nodes": [
                {"ports": asdict(n.ports), "folder": str(n.folder), "pid": n.pid}
                for n in self.nodes
            ],
        }
        temporary = self.folder / "cluster.json.tmp"
        temporary.write_text(json.dumps(description, indent=2))
        os.replace(temporary, self.folder / "cluster.json")

    @classmethod
    def load(cls, state_dir: Path) -> EmbeddedCluster | None:
        """The cluster described under `state_dir`, running or not; None if there is none."""
        description_file = state_dir / "broker" / "cluster.json"
        if not description_file.exists():
            return None
        data = json.loads(description_file.read_text())
        cluster = cls(
            state_dir=state_dir,
            brokers=int(data["brokers"]),
            overrides=dict(data.get("overrides", {})),
            heap=str(data.get("heap", DEFAULT_HEAP)),
            cluster_id=str(data["cluster_id"]),
            classpath=str(data.get("classpath", "")),
            sasl=SaslSetup.from_json(data["sasl"]) if data.get("sasl") else None,
            release=KafkaRelease(
                str(data.get("kafka_version", KafkaRelease().version)),
                str(data.get("mode", KafkaRelease().mode)),
            ),
        )
        if data.get("zookeeper_port"):
            cluster.zookeeper = ZooKeeperServer(
                cluster.folder / "zookeeper", int(data["zookeeper_port"])
            )
        cluster.nodes = [
            BrokerNode(NodePorts(**n["ports"]), Path(n["folder"]), n["pid"]) for n in data["nodes"]
        ]
        return cluster

    @classmethod
    def running(cls, state_dir: Path) -> EmbeddedCluster | None:
        cluster = cls.load(state_dir)
        return cluster if cluster is not None and cluster.running_nodes() else None

    # -- internals -----------------------------------------------------------------------------

    def _assign_ports(self) -> None:
        each = 5 if self.sasl else 4
        zookeeper = self.release.zookeeper
        ports = lasting_ports(each * self.brokers + zookeeper)  # kept across restarts
        self.zookeeper = None
        if zookeeper:
            self.zookeeper = ZooKeeperServer(self.folder / "zookeeper", ports[-1])
        self.nodes = []
        for index in range(self.brokers):
            p = ports[each * index : each * index + each]
            node_id = index + 1
            sasl_port = p[4] if self.sasl else 0
            self.nodes.append(
                BrokerNode(
                    NodePorts(node_id, p[0], p[1], p[2], p[3], sasl_port),
                    self.folder / f"node-{node_id}",
                )
            )

    def _write_node_files(self, node: BrokerNode) -> None:
        (node.folder / "logs").mkdir(parents=True, exist_ok=True)
        security = sasl_properties(self.sasl) if self.sasl else {}
        props = server_properties(
            node.ports,
            [n.ports for n in self.nodes],
            node.folder / "data",
            {**security, **self.overrides},
            release=self.release,
            zookeeper_connect=self.zookeeper.connect if self.zookeeper else "",
        )
        node.properties_file.write_text(render_properties(props))
        logging = logging_config(self.release, node.folder, node.log_file)
        logging.path.write_text(logging.text)

    def _ensure_zookeeper(self, java: Path) -> None:
        if self.zookeeper is not None and not self.zookeeper.alive():
            self.zookeeper.start(
                java, self.classpath, self.release, die_with_parent=self.die_with_parent
            )

    def _spawn(self, java: Path, node: BrokerNode) -> None:
        node.process = processes.spawn(
            self._broker_command(java, node),
            node.folder / "logs" / "stdout.log",
            die_with_parent=self.die_with_parent,
        )
        node.pid = node.process.pid

    def _jvm(self, java: Path, node: BrokerNode) -> list[str]:
        return [
            str(java),
            f"-Xmx{self.heap}",
            f"-Xms{min(256, _megabytes(self.heap))}m",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            logging_config(self.release, node.folder, node.log_file).jvm_option,
            *(f"-D{k}={v}" for k, v in (self.sasl.jvm_properties() if self.sasl else {}).items()),
            "-cp",
            self.classpath,
        ]

    def _broker_command(self, java: Path, node: BrokerNode) -> list[str]:
        return [*self._jvm(java, node), BROKER_MAIN, str(node.properties_file)]

    def _format(self, java: Path, node: BrokerNode) -> None:
        arguments = storage_format_arguments(self.release, self.cluster_id, node.properties_file)
        if not arguments:
            return  # a ZooKeeper-mode broker writes its meta.properties itself
        command = [
            *self._jvm(java, node),
            STORAGE_TOOL,
            *arguments,
            *(self.sasl.format_arguments() if self.sasl else []),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise ClusterError(
                f"formatting broker {node.node_id}'s storage failed:\n"
                f"{result.stdout}{result.stderr}"
            )

    def _first_death(self) -> str | None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is not None:
                return (
                    f"broker {node.node_id} exited while starting; last lines of "
                    f"{node.log_file}:\n{_tail(node.log_file)}"
                    f"{_tail(node.folder / 'logs' / 'stdout.log')}"
                )
        return None


def _new_cluster_id() -> str:
    # Like Kafka's Uuid.randomUuid: an id starting with '-' reads as an option to kafka-storage
    # (one CI run in 64 failed on it), so draw again.
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _megabytes(heap: str) -> int:
    unit = heap[-1].lower()
    number = int(heap[:-1]) if unit in "kmg" else int(heap) // (1024 * 1024)
    return {"k": number // 1024, "m": number, "g": number * 1024}.get(unit, number)


def _tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
