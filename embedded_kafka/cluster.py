"""An embedded Apache Kafka cluster (KRaft combined mode) on loopback, owned by dgm.

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
    log4j2_properties,
    render_properties,
    server_properties,
)
from embedded_kafka.readiness import wait_for_brokers
from embedded_kafka.security import SaslSetup
from embedded_kafka.security import server_properties as sasl_properties

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
    nodes: list[BrokerNode] = field(default_factory=list)
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
        existing = EmbeddedCluster.load(self.state_dir)
        if existing is not None and existing.running_nodes():
            raise ClusterError(
                f"an embedded cluster already runs at {existing.bootstrap_servers} "
                f"(state {self.folder}); stop it first with `dgm broker stop`"
            )
        java = find_java()
        self.classpath = (distribution or resolve_distribution()).classpath
        reuse = existing is not None and existing.brokers == self.brokers and not fresh
        if existing is not None and not reuse:
            shutil.rmtree(self.folder)
        self.cluster_id = existing.cluster_id if reuse and existing else _new_cluster_id()
        self._assign_ports()
        for node in self.nodes:
            self._write_node_files(node)
            if not (node.folder / "data" / "meta.properties").exists():
                self._format(java, node)
        for node in self.nodes:
            self._spawn(java, node)
        self.save()
        try:
            wait_for_brokers(
                self.bootstrap_servers, set(self.node_ids()), timeout, self._first_death
            )
        except Exception:
            self.stop()
            raise

    def stop(self, timeout: float = 45.0) -> list[int]:
        """Stop every broker (clean shutdown, SIGKILL after `timeout`); idempotent."""
        # Found by command line, not by recorded pid: a half-started or forgotten broker of
        # this cluster is stopped too. The marker ends with a separator, so a second cluster
        # whose path merely starts with this one's folder (state dirs `s` and `s/broker-b`)
        # is left running.
        marker = self.process_marker
        stubborn = processes.terminate(processes.find_pids(marker), marker, timeout)
        for node in self.nodes:
            if node.process is not None:
                node.process.wait()
            node.pid, node.process = None, None
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
        self._spawn(find_java(), node)
        self.save()
        wait_for_brokers(self.bootstrap_servers, {node_id}, timeout, self._first_death)

    def start_stopped(self, timeout: float = 120.0) -> list[int]:
        """Start every broker that is not running, all at once (after a whole-cluster outage
        no controller quorum forms until enough of them are back); their node ids, once all
        answer."""
        stopped = [node for node in self.nodes if not node.alive()]
        java = find_java()
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
        ports = lasting_ports(each * self.brokers)  # kept across restarts
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
        )
        node.properties_file.write_text(render_properties(props))
        (node.folder / "log4j2.properties").write_text(log4j2_properties(node.log_file))

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
            f"-Dlog4j2.configurationFile={node.folder / 'log4j2.properties'}",
            *(f"-D{k}={v}" for k, v in (self.sasl.jvm_properties() if self.sasl else {}).items()),
            "-cp",
            self.classpath,
        ]

    def _broker_command(self, java: Path, node: BrokerNode) -> list[str]:
        return [*self._jvm(java, node), BROKER_MAIN, str(node.properties_file)]

    def _format(self, java: Path, node: BrokerNode) -> None:
        command = [
            *self._jvm(java, node),
            STORAGE_TOOL,
            "format",
            "--ignore-formatted",
            f"--cluster-id={self.cluster_id}",
            "-c",
            str(node.properties_file),
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
