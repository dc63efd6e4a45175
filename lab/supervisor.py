"""Run processor processes, SIGKILL them where aimed and restart them; let a visitor join the
group and leave it again (a rebalance).

A kill is a real SIGKILL of a real process. Only its timing is chosen: the processor announces
each phase on stdout and waits for the supervisor's `go` before its next step, so a kill sent
on reading `phase produced` lands between produce and commit (see lab.processors.announce).
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import dgm
from lab import child_process
from lab.processors.announce import PHASES, Phase, parse_partitions, parse_phase
from lab.processors.settings import Mode, ProcessorSettings

KillAim = Literal["between-produce-and-commit", "between-commit-and-produce", "random"]
KILL_AIMS: tuple[str, ...] = get_args(KillAim)
# The phase line after which a kill lands where the aim says.
PHASE_OF_AIM: dict[str, Phase] = {
    "between-produce-and-commit": "produced",
    "between-commit-and-produce": "committed",
}
_MAX_BACKOFF = 8.0
PROCESSOR_COMMAND = (sys.executable, "-m", "lab.processors")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Crash:
    """One SIGKILL of a processor: when, whom, and where in its loop."""

    at: float  # unix time of the kill
    pid: int
    instance: str
    aim: str  # the KillAim
    phase: str  # the phase the process had just announced
    batch: int
    returncode: int  # as the OS reported it: -9 is death by SIGKILL
    signal: str = "SIGKILL"


@dataclass(frozen=True)
class Exit:
    """A processor exit the supervisor did not cause (it is restarted with backoff)."""

    at: float
    pid: int
    instance: str
    returncode: int


@dataclass(frozen=True)
class Visit:
    """A second instance that joined the group, processed a while and left cleanly."""

    joined_at: float
    left_at: float
    pid: int
    instance: str
    partitions: tuple[int, ...]  # what the rebalance gave it
    batches: int
    returncode: int


def child_env() -> dict[str, str]:
    """The environment with dgm importable, installed or not."""
    root = str(Path(dgm.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


@dataclass(eq=False)
class ProcessorProcess:
    """One processor OS process and what it has announced."""

    mode: Mode
    settings: ProcessorSettings
    log_dir: Path
    on_line: Callable[[ProcessorProcess, str], None]
    # The program, told its settings as JSON on stdin; () = `python -m lab.processors --mode`.
    command: tuple[str, ...] = ()
    popen: subprocess.Popen[str] = field(init=False)
    batches: int = 0
    partitions: tuple[int, ...] = ()
    assigned_at: float | None = None
    killed: bool = False  # by the supervisor, on purpose
    started: float = field(default_factory=time.monotonic)
    ready: threading.Event = field(default_factory=threading.Event)
    _stdin_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        name = self.settings.instance
        command = [
            *(self.command or (*PROCESSOR_COMMAND, "--mode", self.mode)),
            "--settings-json",
            "-",
        ]
        self.popen = child_process.spawn(
            command, self.log_dir / f"{name}.log", subprocess.PIPE, child_env()
        )
        assert self.popen.stdin is not None
        # Paced: every phase line waits for our `go` (_read), which the transcript thread sends
        # only after on_line, the kill included, has run.
        self.popen.stdin.write(dataclasses.replace(self.settings, paced=True).to_json() + "\n")
        self.popen.stdin.flush()
        child_process.transcribe(self.popen, self.log_dir / f"{name}.out", self._read)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def _read(self, line: str) -> None:
        partitions = parse_partitions(line, "assigned")
        phase = parse_phase(line)
        if partitions is not None:
            self.partitions, self.assigned_at = tuple(partitions), time.time()
        elif line.startswith("ready"):
            self.ready.set()
        elif phase is not None and phase[0] == "produced":
            self.batches += 1
        self.on_line(self, line)
        if phase is not None:
            child_process.answer_go(self.popen, self._stdin_lock)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (the processor finishes its step and closes), SIGKILL after `timeout`. Its
        stdin ends first, so a phase waiting for `go` goes on without it."""
        child_process.end_input(self.popen, self._stdin_lock)
        return child_process.stop(self.popen, timeout)


class Supervisor:
    """Keeps one processor instance (`settings.instance`) running; kills it on request."""

    def __init__(
        self,
        mode: Mode,
        settings: ProcessorSettings,
        log_dir: Path,
        aim: KillAim = "between-produce-and-commit",
        seed: int | None = None,
        progress: Progress | None = None,
        command: tuple[str, ...] = (),  # another processor program (see ProcessorProcess)
    ) -> None:
        self.mode, self.settings, self.log_dir, self.aim = mode, settings, log_dir, aim
        self.command = command
        self.progress = progress or (lambda _: None)
        self.crashes: list[Crash] = []
        self.exits: list[Exit] = []
        self.visits: list[Visit] = []
        self._random = random.Random(seed)
        self._lock = threading.RLock()
        self._armed: tuple[Phase, threading.Event] | None = None
        self._stopping = threading.Event()
        self._processes: list[ProcessorProcess] = []
        self._main: ProcessorProcess | None = None
        self._monitor = threading.Thread(target=self._keep_running, daemon=True)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._main = self._spawn(self.settings)
        self._monitor.start()

    def stop(self) -> None:
        """Stop every process (clean close, SIGKILL if stuck); idempotent."""
        self._stopping.set()
        if self._monitor.is_alive():
            self._monitor.join()
        with self._lock:
            processes = list(self._processes)
        for process in processes:
            process.stop()

    def __enter__(self) -> Supervisor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def main(self) -> ProcessorProcess:
        assert self._main is not None, "start() first"
        return self._main

    def live_pids(self) -> list[int]:
        with self._lock:
            return [p.pid for p in self._processes if p.popen.poll() is None]

    # -- faults ------------------------------------------------------------------------------

    def crash(self, timeout: float = 60.0) -> Crash | None:
        """SIGKILL the main instance when it next announces the aimed phase; the crash, or
        None if it announced none within `timeout` (nothing to process)."""
        phase = PHASE_OF_AIM[self.aim] if self.aim in PHASE_OF_AIM else self._random.choice(PHASES)
        done = threading.Event()
        with self._lock:
            self._armed = (phase, done)
        if not done.wait(timeout):
            with self._lock:
                if self._armed is not None and self._armed[1] is done:
                    self._armed = None
                    return None
        return self.crashes[-1]

    def rebalance(self, stay: float = 3.0, timeout: float = 60.0) -> Visit:
        """A dynamic member joins the group, processes up to `stay` seconds, and leaves."""
        instance = f"visitor-{len(self.visits) + 1}"
        settings = dataclasses.replace(self.settings, instance=instance, static_member=False)
        with self._lock:
            visitor = self._spawn(settings)
        deadline = time.monotonic() + timeout
        while visitor.assigned_at is None and time.monotonic() < deadline:
            if visitor.popen.poll() is not None:
                break
            time.sleep(0.05)
        joined_at = visitor.assigned_at or time.time()
        self.progress(f"rebalance: {instance} (pid {visitor.pid}) joined, got {visitor.partitions}")
        stay_until = time.monotonic() + stay
        while time.monotonic() < stay_until and visitor.popen.poll() is None:
            time.sleep(0.05)
        returncode = visitor.stop()
        visit = Visit(
            joined_at, time.time(), visitor.pid, instance, visitor.partitions,
            visitor.batches, returncode,
        )  # fmt: skip
        self.visits.append(visit)
        self.progress(f"rebalance: {instance} left after {visit.batches} batches")
        return visit

    # -- internals ---------------------------------------------------------------------------

    def _spawn(self, settings: ProcessorSettings) -> ProcessorProcess:
        process = ProcessorProcess(self.mode, settings, self.log_dir, self._on_line, self.command)
        self._processes.append(process)
        return process

    def _on_line(self, process: ProcessorProcess, line: str) -> None:
        parsed = parse_phase(line)
        if parsed is None:
            return
        with self._lock:
            if self._armed is None or process is not self._main or parsed[0] != self._armed[0]:
                return
            process.killed = True
            process.popen.send_signal(signal.SIGKILL)
            at = time.time()
            crash = Crash(
                at, process.pid, process.settings.instance, self.aim, parsed[0], parsed[1],
                process.popen.wait(),
            )  # fmt: skip
            self.crashes.append(crash)
            done, self._armed = self._armed[1], None
        self.progress(
            f"crash {len(self.crashes)}: SIGKILL pid {crash.pid} after 'phase {crash.phase}' "
            f"(batch {crash.batch}), exit {crash.returncode}"
        )
        done.set()

    def _keep_running(self) -> None:
        backoff = 0.5
        while not self._stopping.wait(0.05):
            with self._lock:
                main = self.main
                returncode = main.popen.poll()
                if returncode is None:
                    continue
                if main.killed:
                    self._main = self._spawn(self.settings)
                    continue
                self.exits.append(Exit(time.time(), main.pid, main.settings.instance, returncode))
            # Exited on its own (broker away, fenced, a bug): restart, but back off; a process
            # that ran a good while before failing starts the backoff afresh.
            if time.monotonic() - main.started > 30:
                backoff = 0.5
            self.progress(
                f"processor pid {main.pid} exited with {returncode}; restarting in {backoff:.1f}s"
            )
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, _MAX_BACKOFF)
            with self._lock:
                self._main = self._spawn(self.settings)
