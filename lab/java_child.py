"""A lab Java application as OS processes: start one, SIGKILL it, restart it, stop it.

Each application says on stdout when it is ready to work (Kafka Streams: `state RUNNING`;
MirrorMaker 2: its source task's start line); a `Readiness` reads each line and says whether it
made the process ready (True), not ready (False) or neither (None). Stdout is kept, stamped
with time and pid, in `<log_dir>/<name>.out`; stderr in `<log_dir>/<name>.log`.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab import child_process

RESTART_DELAY = 1.0  # seconds before restarting an instance that died on its own
Progress = Callable[[str], None]
Readiness = Callable[[str], bool | None]


@dataclass(frozen=True)
class Kill:
    at: float  # unix time of the SIGKILL
    pid: int
    uptime: float  # seconds the instance had lived
    running_for: float  # seconds since it said it was ready
    returncode: int  # -9: died of the SIGKILL


@dataclass(frozen=True)
class Exit:
    """An instance that died without being killed (restarted at once)."""

    at: float
    pid: int
    returncode: int


@dataclass(frozen=True)
class ChildSpec:
    command: list[str]
    log_dir: Path
    name: str  # names the log files
    readiness: Readiness


@dataclass(eq=False)
class JavaChild:
    spec: ChildSpec
    popen: subprocess.Popen[str] = field(init=False)
    started: float = field(default_factory=time.monotonic)
    running_since: float | None = None
    running: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.spec.log_dir.mkdir(parents=True, exist_ok=True)
        log_dir, name = self.spec.log_dir, self.spec.name
        self.popen = child_process.spawn(
            self.spec.command, log_dir / f"{name}.log", subprocess.DEVNULL
        )
        child_process.transcribe(self.popen, log_dir / f"{name}.out", self._read)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _read(self, line: str) -> None:
        ready = self.spec.readiness(line)
        if ready is True:
            self.running_since = time.monotonic()
            self.running.set()
        elif ready is False:
            self.running.clear()

    def kill(self) -> Kill:
        now = time.monotonic()
        self.popen.send_signal(signal.SIGKILL)
        returncode = self.popen.wait()
        since = self.running_since
        return Kill(
            time.time(), self.pid, now - self.started, now - since if since else 0.0, returncode
        )

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (the application closes cleanly), SIGKILL after `timeout`."""
        return child_process.stop(self.popen, timeout)


class JavaSupervisor:
    """Keeps one instance of the application running: kills it on request and restarts it;
    an instance that dies on its own is recorded and restarted too."""

    def __init__(self, spec: ChildSpec, progress: Progress) -> None:
        self.spec, self.progress = spec, progress
        self.kills: list[Kill] = []
        self.exits: list[Exit] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._current: JavaChild | None = None
        self._monitor = threading.Thread(target=self._keep_running, daemon=True)

    def start(self) -> None:
        with self._lock:
            self._current = JavaChild(self.spec)
        self._monitor.start()

    @property
    def current(self) -> JavaChild:
        assert self._current is not None, "start() first"
        return self._current

    def kill_and_restart(self) -> Kill:
        with self._lock:
            kill = self.current.kill()
            self.kills.append(kill)
            self._current = JavaChild(self.spec)
        self.progress(
            f"kill {len(self.kills)}: SIGKILL {self.spec.name} pid {kill.pid} after "
            f"{kill.running_for:.1f}s running, exit {kill.returncode}; restarted as pid "
            f"{self.current.pid}"
        )
        return kill

    def stop(self) -> int | None:
        """Stop for good (no restart); the last instance's exit code."""
        self._stopping.set()
        if self._monitor.is_alive():
            self._monitor.join()
        return self._current.stop() if self._current is not None else None

    def _keep_running(self) -> None:
        while not self._stopping.wait(0.1):
            with self._lock:
                process = self.current
                returncode = process.popen.poll()
                if returncode is None:
                    continue
                self.exits.append(Exit(time.time(), process.pid, returncode))
            self.progress(
                f"{self.spec.name} pid {process.pid} exited with {returncode}; restarting"
            )
            if self._stopping.wait(RESTART_DELAY):
                return
            with self._lock:
                if self._current is process:  # not replaced by a kill meanwhile
                    self._current = JavaChild(self.spec)
