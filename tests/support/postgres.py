"""A real PostgreSQL server for the tests: Debian's `postgresql` binaries, started once.

`DGM_POSTGRES_DSN` names an existing server instead (a libpq URI, e.g.
postgresql://user:secret@127.0.0.1:5432/dgm). Otherwise a throw-away cluster is made with
initdb in a temporary directory and run as an unprivileged user (PostgreSQL refuses root):
trust authentication, TCP on 127.0.0.1 at a free port only, its unix socket in the same
temporary directory, every statement logged to `log_path` (tests read it to see the SQL a
reader sent). Stopped with a fast shutdown and removed at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

ENV_DSN = "DGM_POSTGRES_DSN"
READY_TIMEOUT_S = 60.0
# The user the server runs as when the tests run as root (it exists on every Debian system).
SERVER_USER = "nobody"
SUPERUSER = "postgres"
_PR_SET_PDEATHSIG = 1


class PostgresUnavailable(RuntimeError):
    """No server can be started here (the binaries are missing)."""


@dataclass(frozen=True)
class PostgresUnderTest:
    """A database the tests may create tables in; `log_path` is None for an external server."""

    host: str
    port: int
    user: str
    password: str
    database: str
    log_path: Path | None

    @property
    def dsn(self) -> str:
        """A libpq URI (what psycopg connects with)."""
        secret = f":{quote(self.password, safe='')}" if self.password else ""
        auth = f"{quote(self.user, safe='')}{secret}@"
        return f"postgresql://{auth}{self.host}:{self.port}/{self.database}"

    @property
    def jdbc_url(self) -> str:
        """The JDBC URL of the same database, without credentials (they go separately)."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    def new_table_name(self, prefix: str = "t") -> str:
        return f"{prefix}_{uuid.uuid4().hex[:10]}"

    def logged_statements(self) -> str:
        """Everything the server logged so far ('' for an external server)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


def external() -> PostgresUnderTest | None:
    dsn = os.environ.get(ENV_DSN)
    if not dsn:
        return None
    parts = urlsplit(dsn)
    return PostgresUnderTest(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        user=parts.username or SUPERUSER,
        password=parts.password or "",
        database=parts.path.lstrip("/") or "postgres",
        log_path=None,
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _as_server_user() -> dict[str, Any]:
    """Popen arguments that run a command as SERVER_USER when the tests run as root."""
    if os.geteuid() != 0:
        return {}
    user = pwd.getpwnam(SERVER_USER)
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _quit_with_parent() -> None:
    """In the server process (after its user is set): SIGQUIT, PostgreSQL's immediate
    shutdown, when the test process dies without stopping it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT)


def _ready(bin_dir: Path, socket_dir: Path, port: int) -> bool:
    probe = [str(bin_dir / "pg_isready"), "-q", "-h", str(socket_dir), "-p", str(port)]
    probe += ["-U", SUPERUSER, "-d", "postgres"]
    return subprocess.run(probe, check=False, timeout=10).returncode == 0


@contextlib.contextmanager
def local_server() -> Iterator[PostgresUnderTest]:
    """A fresh cluster for the lifetime of the context; PostgresUnavailable without binaries."""
    bin_dir = binaries()
    if bin_dir is None:
        raise PostgresUnavailable("PostgreSQL is not installed (apt-get install postgresql)")
    # Not under pytest's temp root: that is private to the test user, the server user needs in.
    top = Path(tempfile.mkdtemp(prefix="dgm-postgres-"))
    data, sockets, log = top / "data", top / "sockets", top / "server.log"
    sockets.mkdir()
    log.touch()
    if os.geteuid() == 0:
        user = pwd.getpwnam(SERVER_USER)
        for path in (top, sockets, log):
            os.chown(path, user.pw_uid, user.pw_gid)
    server: subprocess.Popen[bytes] | None = None
    try:
        initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust"]
        subprocess.run(
            [*initdb, "-E", "UTF8", "--no-sync", "--no-instructions"],
            **_as_server_user(),
            check=True,
            capture_output=True,
            timeout=120,
        )
        port = _free_port()
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(port),
            "unix_socket_directories": str(sockets),
            "fsync": "off",  # a test cluster: durability against power loss is not tested
            "full_page_writes": "off",
            "log_statement": "all",
            "log_min_messages": "warning",
            "max_connections": "50",
        }
        options = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        with log.open("ab") as out:
            server = subprocess.Popen(
                [str(bin_dir / "postgres"), "-D", str(data), *options],
                **_as_server_user(),
                preexec_fn=_quit_with_parent,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(bin_dir, sockets, port):
            if server.poll() is not None:
                raise RuntimeError(f"postgres exited with {server.returncode}: {log.read_text()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"postgres not ready after {READY_TIMEOUT_S} s: {log}")
            time.sleep(0.2)
        yield PostgresUnderTest("127.0.0.1", port, SUPERUSER, "", "postgres", log)
    finally:
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
        shutil.rmtree(top, ignore_errors=True)
