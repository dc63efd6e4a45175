"""What the bounded lab runners share (lab.run, lab.no_offsets, lab.streams, lab.mirror): a run
folder, the supervised application driven through the stamped producer and the faults up to
the catch-up, the report's common fields and the command line around a run."""

from __future__ import annotations

import argparse
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypedDict, TypeVar

from dgm.util.waiting import TimedOut, wait_until
from lab.ledger import read_ledger
from lab.pipeline import PipelineNames, say_on_stderr
from lab.producer import ProducerResult, ProducerSettings, run_producer

Progress = Callable[[str], None]
T = TypeVar("T")


class Readiness(Protocol):
    """What `supervise` waits on: a threading.Event, or a check of one's own."""

    def is_set(self) -> bool: ...


class Produced(TypedDict):
    """The report fields about the stamped producer."""

    messages: dict[str, int]  # requested, sent, acked, failed, aborted
    producer_session: str
    ledger_path: str


class Timing(TypedDict):
    """The report fields closing every report."""

    started_at: float
    finished_at: float
    run_dir: str


class Report(Protocol):
    def to_json(self) -> str: ...


class Checked(Protocol):
    def problems(self) -> list[str]: ...


class Supervised(Protocol):
    """What keeps the run's application running (lab.supervisor, lab.java_child)."""

    def start(self) -> None: ...

    def stop(self) -> object: ...


S = TypeVar("S", bound=Checked)
R = TypeVar("R", bound=Report)


@dataclass(frozen=True)
class LabRun:
    """One run: its unique names, its own folder (ledger, logs, report) and its progress."""

    names: PipelineNames
    run_dir: Path  # absolute
    say: Progress
    started_at: float

    @classmethod
    def begin(
        cls, name: str, lab_dir: Path, progress: Progress | None, problems: Sequence[str] = ()
    ) -> LabRun:
        """ValueError naming the `problems`, if any; else the run's names and folder."""
        if problems:
            raise ValueError("; ".join(problems))
        names = PipelineNames.derive(name)
        run_dir = (lab_dir / names.group).absolute()
        run_dir.mkdir(parents=True, exist_ok=True)
        return cls(names, run_dir, progress or say_on_stderr, time.time())

    def producer(
        self, bootstrap_servers: str, messages: int, rate: float | None, stamp_headers: bool = True
    ) -> ProducerSettings:
        """The stamped producer of the run's source topic, its ledger in the run folder."""
        return ProducerSettings(
            bootstrap_servers=bootstrap_servers,
            topic=self.names.source,
            messages=messages,
            ledger_path=self.run_dir / "ledger.jsonl",
            rate=rate,
            stamp_headers=stamp_headers,
        )

    def produce(
        self, producer: ProducerSettings, faults: Callable[[Callable[[], bool]], T]
    ) -> tuple[ProducerResult, T]:
        """Run the producer in a thread while `faults(producer_done)` runs here; the producer
        is stopped if the faults fail."""
        stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            try:
                produced = pool.submit(run_producer, producer, stop)
                done = faults(produced.done)
                result: ProducerResult = produced.result()
            finally:
                stop.set()
        self.say(f"producer done: {result.sent} sent, {result.acked} acked")
        return result, done

    def supervise(
        self,
        supervisor: Supervised,
        ready: Callable[[], Readiness],
        what: str,
        producer: ProducerSettings,
        faults: Callable[[Callable[[], bool]], T],
        catch_up: Callable[[], bool],
        timeout: float = 120.0,
    ) -> tuple[ProducerResult, T, bool]:
        """Start `supervisor`; once its first instance is `ready` (within `timeout`; `what`
        names that wait), produce while `faults(producer_done)` run, then `catch_up()`. The
        supervisor is stopped whatever happens. The producer's result, what `faults` returned
        and whether the application caught up."""
        supervisor.start()
        try:
            wait_until(ready().is_set, timeout, what)
            result, done = self.produce(producer, faults)
            caught_up = catch_up()
        finally:
            supervisor.stop()
        return result, done, caught_up

    def caught_up(self, wait: Callable[[], object], success: str) -> bool:
        """Whether `wait` (the waits for the catch-up) ended before timing out; said either way."""
        try:
            wait()
        except TimedOut as error:
            self.say(f"not caught up: {error}")
            return False
        self.say(success)
        return True

    def timing(self) -> Timing:
        return timing(self.started_at, self.run_dir)

    def write(self, report: R) -> R:
        (self.run_dir / "report.json").write_text(report.to_json() + "\n")
        return report


def produced(result: ProducerResult, producer: ProducerSettings) -> Produced:
    counts = {k: v for k, v in dataclasses.asdict(result).items() if k != "session"}
    return Produced(
        messages={"requested": producer.messages, **counts},
        producer_session=result.session,
        ledger_path=str(producer.ledger_path),
    )


def timing(started_at: float, run_dir: Path) -> Timing:
    """Called last while building the report: now is when the run finished."""
    return Timing(started_at=started_at, finished_at=time.time(), run_dir=str(run_dir))


def sent(producer: ProducerSettings) -> int:
    """Messages sent so far, per the producer's ledger."""
    if not producer.ledger_path.exists():
        return 0
    return len(read_ledger(producer.ledger_path).sent_ids)


def wait_for_share(
    producer: ProducerSettings, fraction: float, producer_done: Callable[[], bool]
) -> None:
    """Until `fraction` of the messages are sent (per the ledger) or the producer is done."""

    def reached() -> bool:
        return producer_done() or sent(producer) >= fraction * producer.messages

    wait_until(reached, 600, f"{fraction:.0%} of the messages to be sent", interval=0.2)


class Crashing(Protocol):
    def crash(self) -> object | None: ...


def crash_evenly(
    supervisor: Crashing,
    producer: ProducerSettings,
    producer_done: Callable[[], bool],
    crashes: int,
    say: Progress,
) -> None:
    """A kill at each of `crashes` evenly spaced points of the production, each where the
    supervisor aims it (None from `crash`: no batch announced within its timeout)."""
    for number in range(1, crashes + 1):
        wait_for_share(producer, number / (crashes + 1), producer_done)
        if supervisor.crash() is None:
            say(f"crash {number}: no batch to kill within the timeout")


def production_problems(
    messages: int,
    kills: int,
    rate: float | None,
    partitions: int,
    before: Sequence[tuple[bool, str]] = (),
) -> list[str]:
    """The messages of the (broken, message) checks `before` and of the checks of the
    production every runner has, in that order."""
    return [
        message
        for broken, message in (
            *before,
            (messages < 1, f"messages: expected >= 1, got {messages}"),
            (kills < 0, f"kills: expected >= 0, got {kills}"),
            (rate is not None and rate <= 0, "rate: expected > 0"),
            (partitions < 1, "partitions: expected >= 1"),
        )
        if broken
    ]


def add_production_options(parser: argparse.ArgumentParser, what: str) -> None:
    """--messages, --rate, --kills (SIGKILLs of `what`)."""
    parser.add_argument("--messages", type=int, default=3000, help="source records")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s (0 = no limit)")
    parser.add_argument("--kills", type=int, default=3, help=f"SIGKILLs of {what}")


def add_folder_options(parser: argparse.ArgumentParser, moments: str) -> None:
    """--lab-dir, --seed (of the random `moments`)."""
    parser.add_argument("--lab-dir", default="lab-runs", help="where each run gets a folder")
    parser.add_argument("--seed", type=int, help=f"seed of the random {moments}")


def run_and_print(parser: argparse.ArgumentParser, settings: S, run: Callable[[S], R]) -> R:
    """The run's report, printed as JSON on stdout; a usage error for invalid settings."""
    problems = settings.problems()
    if problems:
        parser.error("; ".join(problems))
    report = run(settings)
    print(report.to_json())
    return report
