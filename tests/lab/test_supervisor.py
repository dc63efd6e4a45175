"""The supervisor's kills are real SIGKILLs of real processes, aimed at a phase; it restarts
what died, lets a visitor join and leave the group, and leaves no process behind."""

from __future__ import annotations

import itertools
import os
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dgm.util.waiting import wait_until
from lab.offsets import group_offsets
from lab.processors.settings import ProcessorSettings
from lab.producer import ProducerSettings, run_producer
from lab.supervisor import ProcessorProcess, Supervisor


def gone(pid: int) -> bool:
    """True once `pid` no longer runs (a zombie of ours counts as gone: it is dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"


@pytest.fixture
def pipeline(kafka: Any, tmp_path: Path) -> Iterator[tuple[ProcessorSettings, threading.Event]]:
    """A source with a slow, endless-enough stream of stamped messages, and an empty sink."""
    source, sink = kafka.new_topic("sup-src", 3), kafka.new_topic("sup-sink", 3)
    settings = ProcessorSettings(
        kafka.bootstrap_servers, source, f"sup-{uuid.uuid4().hex[:8]}", sink_topic=sink
    )
    stop = threading.Event()
    producing = threading.Thread(
        target=run_producer,
        args=(ProducerSettings(kafka.bootstrap_servers, source, 3000, tmp_path / "l", 50), stop),
    )
    producing.start()
    try:
        yield settings, stop
    finally:
        stop.set()
        producing.join(60)


def test_a_crash_is_a_sigkill_at_the_aimed_phase_then_a_restart(
    pipeline: tuple[ProcessorSettings, threading.Event], tmp_path: Path
) -> None:
    settings, _ = pipeline
    supervisor = Supervisor(
        "at-least-once", settings, tmp_path / "logs", "between-commit-and-produce"
    )
    pids: list[int] = []
    try:
        supervisor.start()
        for _ in range(2):
            crash = supervisor.crash(timeout=60)
            assert crash is not None, "no aimed phase announced"
            pids.append(crash.pid)
            assert crash.returncode == -9 and crash.signal == "SIGKILL"
            assert crash.phase == "committed"
            assert gone(crash.pid)
            # Restarted: a new process that gets back to work.
            old = crash.pid
            wait_until(lambda: supervisor.main.pid != old, 10, "a restart")  # noqa: B023
            wait_until(lambda: supervisor.main.batches > 0, 60, "the restart to process")
        pids.append(supervisor.main.pid)
        assert len(set(pids)) == 3
        assert supervisor.exits == [], "every death was ours"
        transcript = (tmp_path / "logs" / "main.out").read_text()
        assert transcript.count(" ready") == 3
    finally:
        supervisor.stop()
    assert supervisor.live_pids() == []
    assert all(gone(pid) for pid in pids)


def test_a_visitor_joins_takes_partitions_and_leaves_cleanly(
    pipeline: tuple[ProcessorSettings, threading.Event], tmp_path: Path
) -> None:
    settings, _ = pipeline
    with Supervisor("exactly-once", settings, tmp_path / "logs") as supervisor:
        wait_until(lambda: supervisor.main.partitions == (0, 1, 2), 60, "main to own everything")
        visit = supervisor.rebalance(stay=3)
        assert visit.partitions and set(visit.partitions) < {0, 1, 2}
        assert visit.returncode == 0, "a visitor leaves by a clean close"
        assert gone(visit.pid)
        # The clean leave hands its partitions straight back to the static main member.
        wait_until(lambda: supervisor.main.partitions == (0, 1, 2), 30, "main to get them back")
        assert supervisor.crashes == [] and supervisor.exits == []
    assert supervisor.live_pids() == []


def test_a_processor_that_dies_on_its_own_is_restarted_with_backoff(tmp_path: Path) -> None:
    # A sink table name the store refuses: the process fails at start, every time.
    settings = ProcessorSettings(
        "127.0.0.1:9", "src", "g", sink_path=str(tmp_path / "s.sqlite"), sink_table="no such"
    )
    lines: list[str] = []
    supervisor = Supervisor("idempotent-sink", settings, tmp_path / "logs", progress=lines.append)
    try:
        supervisor.start()
        wait_until(lambda: len(supervisor.exits) >= 3, 60, "three exits")
    finally:
        supervisor.stop()
    exits = supervisor.exits
    assert all(e.returncode == 1 for e in exits)
    gaps = [b.at - a.at for a, b in itertools.pairwise(exits)]
    assert gaps[1] > gaps[0], f"backoff should grow: {gaps}"
    assert any("restarting in" in line for line in lines)
    assert "expected letters" in (tmp_path / "logs" / "main.log").read_text()
    assert supervisor.live_pids() == []
    assert all(gone(e.pid) for e in exits)
    assert os.getpid() not in [e.pid for e in exits]


def test_a_supervisor_slow_to_read_still_finds_the_batch_uncommitted(
    pipeline: tuple[ProcessorSettings, threading.Event], kafka: Any, tmp_path: Path
) -> None:
    """The window between produce and commit is held open until the supervisor has read the
    phase line, however long that takes: here ten times step_delay."""
    settings, _ = pipeline
    seen: dict[str, dict[int, int]] = {}

    def committed() -> dict[int, int]:
        return group_offsets(kafka.admin(), settings.group_id, settings.source_topic, 3)

    def slow_reader(process: ProcessorProcess, line: str) -> None:
        if line.split()[:2] == ["phase", "produced"] and "held" not in seen:
            seen["before"] = committed()
            time.sleep(10 * settings.step_delay)  # a loaded machine reading late: what is tested
            seen["held"] = committed()

    process = ProcessorProcess("at-least-once", settings, tmp_path / "logs", slow_reader)
    try:
        wait_until(lambda: "held" in seen, 60, "a first batch produced")
        assert seen["held"] == seen["before"], "committed before the supervisor had read"
        # Answered, it commits the batch.
        wait_until(lambda: committed() != seen["held"], 30, "the batch's commit after the go")
    finally:
        assert process.stop() == 0


def test_a_phase_left_unanswered_still_stops_cleanly(
    pipeline: tuple[ProcessorSettings, threading.Event], tmp_path: Path
) -> None:
    """A supervisor that stops while a processor waits for its go ends stdin: the processor
    finishes its step and closes (exit 0), it is not SIGKILLed after the timeout."""
    settings, _ = pipeline
    reading = threading.Event()
    stuck = threading.Event()

    def never_answers(process: ProcessorProcess, line: str) -> None:
        if line.startswith("phase"):
            reading.set()
            stuck.wait(60)  # holds the transcript thread: no go is sent

    process = ProcessorProcess("at-least-once", settings, tmp_path / "logs", never_answers)
    try:
        assert reading.wait(60), "no phase announced"
        assert process.stop(timeout=20) == 0
    finally:
        stuck.set()
