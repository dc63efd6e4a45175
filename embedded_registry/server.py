"""An embedded Apicurio Registry on loopback: in-memory storage, one free port, its log in a file.

Its settings go to `<folder>/config/application.properties`, which Quarkus reads from the
working directory, so a password never appears on a command line. With `basic_auth`, every
API under /apis (Apicurio's own and the Confluent-compatible one) demands those credentials
(Quarkus's embedded users and HTTP permissions); the health endpoints stay open, so readiness
is asked of /health/ready, whatever the credentials. With `tls` (a PEM certificate chain and
its key) it serves HTTPS only. Client certificates cannot be demanded: this build fixes
Quarkus's client-auth to none.
"""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from dgm.util.errors import UserFacingError
from dgm.util.ports import free_ports
from embedded_kafka import processes
from embedded_kafka.java import JavaNotFound, find_java
from embedded_registry.distribution import RegistryDistribution

LOOPBACK = "127.0.0.1"
CCOMPAT_PATH = "/apis/ccompat/v7"
APICURIO_PATH = "/apis/registry/v3"
DEFAULT_HEAP = "384m"
# A registry for tests and the demo: a small heap, the serial collector and the C1 compiler
# only start it in a few seconds on 2 shared cores (measured: 3 s against 12 s by default).
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true")
_PORT_TAKEN = ("Port already bound", "Address already in use")
_PORT_ATTEMPTS = 3


class RegistryError(UserFacingError):
    pass


@dataclass
class EmbeddedRegistry:
    """One Apicurio Registry process owned by the caller; `start`, then `stop` (or `with`)."""

    folder: Path  # its config, its log; nothing else is written (storage is in memory)
    basic_auth: tuple[str, str] | None = None  # (username, password) demanded under /apis
    tls: tuple[Path, Path] | None = None  # (certificate chain, key), PEM: HTTPS only
    heap: str = DEFAULT_HEAP
    # True for a registry owned by one process (a test session): it dies with that process.
    die_with_parent: bool = True
    port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{LOOPBACK}:{self.port}"

    @property
    def ccompat_url(self) -> str:
        """The Confluent-compatible API: confluent-kafka's `schema.registry.url`."""
        return self.url + CCOMPAT_PATH

    @property
    def apicurio_url(self) -> str:
        return self.url + APICURIO_PATH

    @property
    def log_file(self) -> Path:
        return self.folder / "registry.log"

    @property
    def marker(self) -> str:
        """What this registry's JVM command line, and no other process's, contains."""
        return f"-Ddgm.registry.folder={self.folder}"

    def start(
        self,
        *,
        timeout: float = 120.0,
        progress: Callable[[str], None] = lambda _: None,
        distribution: RegistryDistribution | None = None,
    ) -> None:
        """Fetch the pinned distribution if needed, start it, and return once it is ready."""
        if self.process is not None and self.process.poll() is None:
            raise RegistryError(f"the registry of {self.folder} already runs at {self.url}")
        try:
            java = find_java()
        except JavaNotFound as error:
            raise RegistryError(f"the embedded schema registry needs Java 17+: {error}") from None
        runner = (distribution or RegistryDistribution.pinned()).fetch(progress)
        self.stop()  # a registry of this folder whose starter died would hold its files
        for attempt in range(_PORT_ATTEMPTS):
            self.port = free_ports(1)[0]
            self._write_config()
            self.process = processes.spawn(
                [str(java), f"-Xmx{self.heap}", *JVM_OPTIONS, self.marker, "-jar", str(runner)],
                self.log_file,
                die_with_parent=self.die_with_parent,
                cwd=self.folder,
            )
            try:
                self._wait_ready(timeout)
                return
            except RegistryError:
                self.stop()
                # Another process may take the free port before the JVM binds it: try another.
                if attempt + 1 < _PORT_ATTEMPTS and self._port_was_taken():
                    continue
                raise

    def stop(self, timeout: float = 30.0) -> list[int]:
        """A clean shutdown (SIGTERM), SIGKILL after `timeout`; returns the pids killed.
        Idempotent; finds the JVM by its command line, so a registry whose starter died is
        stopped too."""
        pids = processes.find_pids(self.marker)
        killed = processes.terminate(pids, self.marker, timeout) if pids else []
        if self.process is not None:
            self.process.wait(timeout=timeout)
            self.process = None
        return killed

    def __enter__(self) -> EmbeddedRegistry:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_file.exists():
            return ""
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def _write_config(self) -> None:
        settings = {
            "quarkus.http.host": LOOPBACK,
            "quarkus.http.port": str(self.port),
            # In memory: a test's registry starts empty and leaves nothing behind.
            "apicurio.storage.kind": "sql",
            "apicurio.storage.sql.kind": "h2",
        }
        if self.tls is not None:
            certificate, key = self.tls
            settings |= {
                "quarkus.http.port": "0",  # not opened: plain HTTP is disabled below
                "quarkus.http.ssl-port": str(self.port),
                "quarkus.http.insecure-requests": "disabled",
                "quarkus.http.ssl.certificate.files": str(certificate.absolute()),
                "quarkus.http.ssl.certificate.key-files": str(key.absolute()),
            }
        if self.basic_auth is not None:
            username, password = self.basic_auth
            settings |= {
                "quarkus.http.auth.basic": "true",
                "quarkus.security.users.embedded.enabled": "true",
                "quarkus.security.users.embedded.plain-text": "true",
                f"quarkus.security.users.embedded.users.{username}": password,
                "quarkus.http.auth.permission.apis.paths": "/apis/*",
                "quarkus.http.auth.permission.apis.policy": "authenticated",
            }
        config = self.folder / "config" / "application.properties"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.touch(mode=0o600)  # it may hold a password
        config.write_text("".join(f"{k}={_escaped(v)}\n" for k, v in settings.items()))

    def _wait_ready(self, timeout: float) -> None:
        """Until /health/ready says UP; fails fast, with the log's tail, if the JVM exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RegistryError(
                    f"the schema registry exited with {self.process.returncode} while "
                    f"starting (log {self.log_file}):\n{self.log_tail()}"
                )
            if _health_up(f"{self.url}/health/ready"):
                return
            time.sleep(0.2)
        raise RegistryError(
            f"the schema registry did not become ready at {self.url} within {timeout:.0f}s "
            f"(log {self.log_file}):\n{self.log_tail()}"
        )

    def _port_was_taken(self) -> bool:
        return any(text in self.log_tail(200) for text in _PORT_TAKEN)


def _health_up(url: str) -> bool:
    # Whether our own process on loopback is up, not whom to trust: no certificate check.
    unchecked = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(url, timeout=2.0, context=unchecked) as response:
            return response.status == 200 and b'"UP"' in response.read()
    except (urllib.error.URLError, OSError):  # refused while it boots, 503 until it is ready
        return False


def _escaped(value: str) -> str:
    # A .properties value: backslashes and line breaks would change what Quarkus reads.
    return value.replace("\\", "\\\\").replace("\n", "\\n")
