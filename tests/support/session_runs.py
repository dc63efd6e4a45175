"""The session's lab runs, started side by side the first time a test asks for one of them.

Each run (`RUNS`, tests/conftest.py's fixtures of those names) is a few pipelines on the
session's broker through SIGKILLs, with the collectors sampling them. They mostly wait
(paced producers, processors restarting after a SIGKILL), each on its own topics, groups and
folder, so side by side they take about the longest one's time instead of the sum of all
(88 s one after another in a full run, 2026-11-30). The runs the collected tests use are
started together, and the first test that asks for one waits for all of them: no test runs
beside a run. A run no collected test names (asked for through `request.getfixturevalue`)
starts when asked, alone, as before.

`lab_runs` (tests/support/published_lab.py) stays alone: its verdicts weigh a fault only
while its checked records flowed (grace 0), and its processors, slowed by the runs beside
them, were killed after its last record was written (lab-idempotent-sink with no fault
observed, the one time it ran with these).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import pytest

from tests.support.kafka_cluster import KafkaUnderTest
from tests.support.unused_clusters import asks_for

RUNS = ("postgres_lab_runs", "no_offsets_run", "share_group_runs", "console_relay_run")


class SessionRuns:
    """RUNS' results, by name: those the session's collected tests ask for, run side by side
    once, when made."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self._request = request
        starts = {}
        for name in sorted(n for n in RUNS if any(asks_for(i, n) for i in request.session.items)):
            try:
                starts[name] = run_start(name, request)
            except pytest.skip.Exception:
                continue  # its fixture skips the tests that ask for it
        self._done: dict[str, Future[Any]] = {}
        if starts:
            with ThreadPoolExecutor(len(starts), thread_name_prefix="session-run") as pool:
                self._done = {name: pool.submit(start) for name, start in starts.items()}
                wait(self._done.values())

    def result(self, name: str) -> Any:
        """Run `name`'s result (its error raised here, to the tests that ask for it), started
        now when it was not started with the others."""
        done = self._done.get(name)
        return done.result() if done is not None else run_start(name, self._request)()


def run_start(name: str, request: pytest.FixtureRequest) -> Callable[[], Any]:
    """How to start session run `name`, its fixtures and folder taken here (pytest's thread)."""
    kafka: KafkaUnderTest = request.getfixturevalue("kafka")
    factory: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
    if name == "postgres_lab_runs":
        from tests.support.published_lab import run_postgres_modes

        dsn = request.getfixturevalue("postgres").dsn
        root = factory.mktemp("lab-postgres")
        return lambda: run_postgres_modes(kafka, dsn, root)
    if name == "no_offsets_run":
        from tests.support.no_offsets_run import run_collected as no_offsets

        root = factory.mktemp("no-offsets")
        return lambda: no_offsets(kafka, root)
    if name == "share_group_runs":
        from embedded_kafka.versions import version_numbers
        from tests.support.share_group_run import run_collected as share_groups

        release = kafka.embedded.release if kafka.embedded else None
        if release and version_numbers(release.version) < (4, 2):
            pytest.skip(f"share groups are GA from Kafka 4.2; the broker runs {release.version}")
        root = factory.mktemp("share-group")
        return lambda: share_groups(kafka, root)
    if name == "console_relay_run":
        from tests.support.console_run import run_collected as console_relay

        root = factory.mktemp("console-relay")
        return lambda: console_relay(kafka, root)
    raise ValueError(f"no session run {name!r}")
