"""A real ZooKeeper server for a Kafka 3.x cluster in ZooKeeper mode, on loopback.

It runs from the broker's own pinned jars (Kafka 3.x's runtime closure holds
org.apache.zookeeper:zookeeper), as Kafka's zookeeper-server-start.sh runs it: QuorumPeerMain
with a zoo.cfg of one server, which serves standalone. It listens on 127.0.0.1 only, and on
its client port only (the admin HTTP server, which would bind every interface, is off).
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from embedded_kafka import processes
from embedded_kafka.properties import LOOPBACK, logging_config
from embedded_kafka.readiness import BrokerNotReady
from embedded_kafka.versions import KafkaRelease

MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
HEAP = "256m"


def zoo_cfg(data_dir: Path, port: int) -> str:
    return (
        "tickTime=2000\n"
        f"dataDir={data_dir}\n"
        f"clientPort={port}\n"
        f"clientPortAddress={LOOPBACK}\n"
        "maxClientCnxns=0\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=ruok\n"
    )


@dataclass
class ZooKeeperServer:
    folder: Path  # <cluster folder>/zookeeper: zoo.cfg, data/, logs/
    port: int
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def connect(self) -> str:
        """Kafka's zookeeper.connect."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.folder / "zoo.cfg"

    @property
    def log_file(self) -> Path:
        return self.folder / "logs" / "zookeeper.log"

    @property
    def marker(self) -> str:
        """What its JVM's command line, and no other process's, contains."""
        return str(self.config_file)

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.poll() is None
        return bool(processes.find_pids(self.marker))

    def start(
        self,
        java: Path,
        classpath: str,
        release: KafkaRelease,
        *,
        die_with_parent: bool,
        timeout: float = 60.0,
    ) -> None:
        """Write its files, start it and return once it answers `ruok`."""
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(zoo_cfg(self.folder / "data", self.port))
        logging = logging_config(release, self.folder, self.log_file)
        logging.path.write_text(logging.text)
        command = [
            str(java),
            f"-Xmx{HEAP}",
            "-Djava.awt.headless=true",
            "-Dzookeeper.jmx.log4j.disable=true",
            logging.jvm_option,
            "-cp",
            classpath,
            MAIN,
            str(self.config_file),
        ]
        self.process = processes.spawn(
            command, self.folder / "logs" / "stdout.log", die_with_parent=die_with_parent
        )
        wait_until_serving(self.port, timeout, self._death)

    def _death(self) -> str | None:
        if self.process is not None and self.process.poll() is not None:
            return f"ZooKeeper exited while starting; see {self.log_file}"
        return None


def answers(port: int, timeout: float = 1.0) -> bool:
    """True if a ZooKeeper serves on loopback:`port` (it answers `ruok` with `imok`)."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"
    except OSError:
        return False


def wait_until_serving(
    port: int, timeout: float, died: Callable[[], str | None] = lambda: None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        failure = died()
        if failure:
            raise BrokerNotReady(failure)
        if answers(port):
            return
        time.sleep(0.2)
    raise BrokerNotReady(f"ZooKeeper did not answer on {LOOPBACK}:{port} within {timeout:.0f}s")
