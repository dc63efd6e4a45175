"""The Streams application as OS processes: start one, SIGKILL it, restart it, stop it.

The application says `state <NEW> <OLD>` on stdout at every state change; a process counts as
running from its `state RUNNING` line (its partitions assigned) until it dies.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, get_args

from embedded_kafka.java import find_java
from lab.streams.jars import MAIN_CLASS, StreamsClasspath
from lab.supervisor import _die_with_parent

Guarantee = Literal["exactly_once_v2", "at_least_once"]
GUARANTEES: tuple[str, ...] = get_args(Guarantee)
RESTART_DELAY = 1.0  # seconds before restarting an instance that died on its own
HEAP = "-Xmx256m"  # the machine is shared: a small heap, one stream thread
# PR_SET_PDEATHSIG fires when the forking *thread* ends: fork every instance from this one.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-streams-spawner")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class AppSettings:
    bootstrap_servers: str
    application_id: str  # also the consumer group whose commits Kafka Streams makes
    source: str
    sink: str
    state_dir: Path
    guarantee: Guarantee
    drop_every_tenth: bool = False
    commit_interval_ms: int | None = None  # None: Kafka Streams' default for the guarantee

    def arguments(self) -> list[str]:
        found = [
            "--bootstrap-servers", self.bootstrap_servers,
            "--application-id", self.application_id,
            "--source", self.source,
            "--sink", self.sink,
            "--state-dir", str(self.state_dir),
            "--guarantee", self.guarantee,
        ]  # fmt: skip
        if self.drop_every_tenth:
            found.append("--drop-every-tenth")
        if self.commit_interval_ms is not None:
            found += ["--commit-interval-ms", str(self.commit_interval_ms)]
        return found


@dataclass(frozen=True)
class Kill:
    at: float  # unix time of the SIGKILL
    pid: int
    uptime: float  # seconds the instance had lived
    running_for: float  # seconds since it said RUNNING
    returncode: int  # -9: died of the SIGKILL


@dataclass(frozen=True)
class Exit:
    """An instance that died without being killed (restarted at once)."""

    at: float
    pid: int
    returncode: int


@dataclass(eq=False)
class StreamsProcess:
    command: list[str]
    log_dir: Path
    popen: subprocess.Popen[str] = field(init=False)
    started: float = field(default_factory=time.monotonic)
    running_since: float | None = None
    running: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.popen = _SPAWNER.submit(self._spawn).result()
        transcript = (self.log_dir / "streams.out").open("a")
        reader = threading.Thread(target=self._read, args=(self.popen.stdout, transcript))
        reader.daemon = True
        reader.start()

    def _spawn(self) -> subprocess.Popen[str]:
        with (self.log_dir / "streams.log").open("a") as stderr:
            return subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                bufsize=1,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _read(self, stdout: IO[str], transcript: IO[str]) -> None:
        with transcript:
            for line in stdout:
                transcript.write(f"{time.time():.3f} {self.pid} {line}")
                transcript.flush()
                words = line.split()
                if words[:2] == ["state", "RUNNING"]:
                    self.running_since = time.monotonic()
                    self.running.set()
                elif words[:1] == ["state"]:
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
        """SIGTERM (Kafka Streams closes: commits, leaves the group), SIGKILL after `timeout`."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                return self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
        return self.popen.wait()


def app_command(classpath: StreamsClasspath, settings: AppSettings) -> list[str]:
    return [
        str(find_java()), HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        f"-Dlog4j2.configurationFile={classpath.log_config}",
        "-cp", classpath.classpath, MAIN_CLASS, *settings.arguments(),
    ]  # fmt: skip


class StreamsSupervisor:
    """Keeps one instance of the application running: kills it on request and restarts it;
    an instance that dies on its own is recorded and restarted too."""

    def __init__(self, command: list[str], log_dir: Path, progress: Progress) -> None:
        self.command, self.log_dir, self.progress = command, log_dir, progress
        self.kills: list[Kill] = []
        self.exits: list[Exit] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._current: StreamsProcess | None = None
        self._monitor = threading.Thread(target=self._keep_running, daemon=True)

    def start(self) -> None:
        with self._lock:
            self._current = StreamsProcess(self.command, self.log_dir)
        self._monitor.start()

    @property
    def current(self) -> StreamsProcess:
        assert self._current is not None, "start() first"
        return self._current

    def kill_and_restart(self) -> Kill:
        with self._lock:
            kill = self.current.kill()
            self.kills.append(kill)
            self._current = StreamsProcess(self.command, self.log_dir)
        self.progress(
            f"kill {len(self.kills)}: SIGKILL pid {kill.pid} after {kill.running_for:.1f}s "
            f"running, exit {kill.returncode}; restarted as pid {self.current.pid}"
        )
        return kill

    def stop(self) -> None:
        self._stopping.set()
        if self._monitor.is_alive():
            self._monitor.join()
        if self._current is not None:
            self._current.stop()

    def _keep_running(self) -> None:
        while not self._stopping.wait(0.1):
            with self._lock:
                process = self.current
                returncode = process.popen.poll()
                if returncode is None:
                    continue
                self.exits.append(Exit(time.time(), process.pid, returncode))
            self.progress(f"streams pid {process.pid} exited with {returncode}; restarting")
            if self._stopping.wait(RESTART_DELAY):
                return
            with self._lock:
                if self._current is process:  # not replaced by a kill meanwhile
                    self._current = StreamsProcess(self.command, self.log_dir)
