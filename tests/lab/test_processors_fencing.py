"""exactly-once: a second instance with the same transactional.id fences the first; the zombie
stops (exit 3, `fenced`) instead of committing anything more."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from pathlib import Path
from typing import Any

from dgm.util.waiting import wait_until
from lab.processors.exactly_once import EXIT_FENCED
from lab.processors.settings import ProcessorSettings
from lab.producer import ProducerSettings, run_producer
from lab.supervisor import ProcessorProcess


def test_a_newer_instance_fences_the_zombie(kafka: Any, tmp_path: Path) -> None:
    source, sink = kafka.new_topic("fence-src", 3), kafka.new_topic("fence-sink", 3)
    # Dynamic members, so only the transactional.id (group id + instance) ties them together.
    settings = ProcessorSettings(
        kafka.bootstrap_servers, source, f"fence-{uuid.uuid4().hex[:8]}", sink_topic=sink,
        instance="same", static_member=False,
    )  # fmt: skip
    stop = threading.Event()
    producer = ProducerSettings(kafka.bootstrap_servers, source, 3000, tmp_path / "ledger", 50)
    producing = threading.Thread(target=run_producer, args=(producer, stop))
    producing.start()
    logs = tmp_path / "logs"
    zombie = ProcessorProcess("exactly-once", settings, logs, lambda *_: None)
    newer: ProcessorProcess | None = None
    try:
        wait_until(lambda: zombie.batches > 0, 60, "the first instance to process")
        # Same instance name: same transactional.id; its init_transactions bumps the epoch.
        newer = ProcessorProcess(
            "exactly-once", dataclasses.replace(settings), logs / "newer", lambda *_: None
        )
        assert zombie.popen.wait(60) == EXIT_FENCED
        assert "fenced" in (logs / "same.out").read_text().split()
        assert "fenced by a newer instance" in (logs / "same.log").read_text()
        started = newer.batches
        wait_until(lambda: newer is not None and newer.batches > started, 60, "newer to go on")
        assert newer.popen.poll() is None
    finally:
        stop.set()
        producing.join(60)
        for process in (zombie, newer):
            if process is not None:
                process.stop()
