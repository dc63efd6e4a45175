"""A small group of named child processes: started together, restarted when one dies on its
own (with backoff), stopped together.

Used by `dgm run` and `dgm demo` for the collectors, the analysis loop and the dashboard.
Each child's output (stdout and stderr, its Spark JVM's included) goes through a pipe to
`<log_dir>/<name>.log`, rotated at 10 MB with 3 older files kept (`<name>.log.1` the newest;
dgm.util.log_files). Each child runs in its own session (a Ctrl-C in the terminal reaches only the
parent, which then stops the children in order) and dies with the parent
(PR_SET_PDEATHSIG), so even a SIGKILLed parent leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dgm.util import log_files
from dgm.util.log_files import RotatingFile
from dgm.util.waiting import next_delay

Say = Callable[[str], None]
# A child that ran this long before dying starts its backoff afresh.
HEALTHY_AFTER_S = 60.0
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0


def dgm_command(*args: str, config: Path | None = None) -> list[str]:
    """`dgm [--config F] ARGS...` run by this interpreter (installed console script or not)."""
    prefix = ["--config", str(config)] if config is not None else []
    return [sys.executable, "-m", "shell.cli", *prefix, *args]


def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    command: Sequence[str]
    env: Mapping[str, str] | None = None  # None: this process's environment
    cwd: Path | None = None


@dataclass(frozen=True)
class Restart:
    name: str
    at: float
    returncode: int
    delay: float


@dataclass(eq=False)
class _Service:
    spec: ServiceSpec
    log: RotatingFile
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    delay: float | None = None  # the last backoff, None after a healthy run
    restart_at: float | None = None  # monotonic time a pending restart is due
    restarts: int = 0
    copiers: list[threading.Thread] = field(default_factory=list)

    @property
    def log_path(self) -> Path:
        return self.log.path

    def spawn(self) -> None:
        self.log.write(f"--- {time.strftime('%H:%M:%S')} {' '.join(self.spec.command)}\n".encode())
        self.process = subprocess.Popen(
            list(self.spec.command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=None if self.spec.env is None else dict(self.spec.env),
            cwd=self.spec.cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        assert self.process.stdout is not None
        # Until the pipe's end: the child's and whatever of its offspring still writes.
        copier = threading.Thread(
            target=log_files.copy,
            args=(self.process.stdout, self.log),
            name=f"log-{self.spec.name}",
            daemon=True,
        )
        copier.start()
        self.copiers = [t for t in self.copiers if t.is_alive()] + [copier]
        self.started = time.monotonic()


class ServiceGroup:
    """Named children under one supervisor thread; `stop()` is idempotent."""

    def __init__(
        self,
        log_dir: Path,
        say: Say | None = None,
        poll_s: float = 0.2,
        log_max_bytes: int = log_files.MAX_BYTES,
        log_backups: int = log_files.BACKUPS,
    ) -> None:
        self.log_dir = log_dir
        self.log_max_bytes = log_max_bytes
        self.log_backups = log_backups
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.poll_s = poll_s
        self.restarts: list[Restart] = []
        self._services: dict[str, _Service] = {}
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    def log_path(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(self, spec: ServiceSpec) -> int:
        """Start one child now; its pid."""
        if self._stopping.is_set():
            raise RuntimeError("the service group is stopping")
        with self._lock:
            if spec.name in self._services:
                raise ValueError(f"service {spec.name!r} already started")
            log = RotatingFile(self.log_path(spec.name), self.log_max_bytes, self.log_backups)
            service = _Service(spec, log)
            service.spawn()
            self._services[spec.name] = service
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="services", daemon=True)
                self._watcher.start()
        assert service.process is not None
        return service.process.pid

    def pids(self) -> dict[str, int]:
        """Name -> pid of every child running now."""
        with self._lock:
            services = list(self._services.values())
        return {
            s.spec.name: s.process.pid
            for s in services
            if s.process is not None and s.process.poll() is None
        }

    def running(self, name: str) -> bool:
        return name in self.pids()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every child, a second SIGTERM halfway (`dgm analyze` then abandons the run
        in progress), SIGKILL after `timeout`; then SIGKILL whatever is left of each child's
        process group (a Spark JVM whose driver was killed). Idempotent."""
        self._stopping.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join()
        with self._lock:
            services = list(self._services.values())
        live = [s.process for s in services if s.process is not None]
        for process in live:
            _signal(process, signal.SIGTERM)
        began = time.monotonic()
        for process in live:
            try:
                process.wait(max(0.0, began + timeout / 2 - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(process, signal.SIGTERM)
        for process in live:
            try:
                process.wait(max(0.0, began + timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"{self._name_of(process)} ignored SIGTERM for {timeout:.0f}s: SIGKILL")
                process.kill()
                process.wait()
        for process in live:
            # Each child leads its own session and group (start_new_session): what is left
            # in the group is its own offspring, nobody else's.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        for service in services:
            # The last words of each child (and its group) into its log, then close it. A
            # pipe still held by a process outside the group is left to its daemon thread.
            for copier in service.copiers:
                copier.join(5.0)
            if not any(copier.is_alive() for copier in service.copiers):
                service.log.close()

    def __enter__(self) -> ServiceGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _name_of(self, process: subprocess.Popen[bytes]) -> str:
        for service in self._services.values():
            if service.process is process:
                return service.spec.name
        return f"pid {process.pid}"

    def _watch(self) -> None:
        while not self._stopping.wait(self.poll_s):
            with self._lock:
                services = list(self._services.values())
            for service in services:
                self._check(service)

    def _check(self, service: _Service) -> None:
        process = service.process
        if process is None:
            return
        now = time.monotonic()
        if service.restart_at is not None:
            if now >= service.restart_at and not self._stopping.is_set():
                service.restart_at = None
                service.restarts += 1
                with self._lock:
                    if self._stopping.is_set():
                        return
                    service.spawn()
            return
        returncode = process.poll()
        if returncode is None:
            return
        if now - service.started > HEALTHY_AFTER_S:
            service.delay = None
        service.delay = next_delay(service.delay, FIRST_BACKOFF_S, MAX_BACKOFF_S)
        service.restart_at = now + service.delay
        self.restarts.append(Restart(service.spec.name, time.time(), returncode, service.delay))
        self.say(
            f"{service.spec.name} (pid {process.pid}) exited with {returncode}; restarting in "
            f"{service.delay:.0f}s (log: {service.log_path})"
        )
