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

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import pytest

from tests.support.unused_clusters import asks_for

RUNS = ("postgres_lab_runs", "no_offsets_run", "share_group_runs", "console_relay_run")


def wanted(items: Iterable[pytest.Item]) -> set[str]:
    """The RUNS some of `items` ask for."""
    return {name for item in items for name in RUNS if asks_for(item, name)}


class SessionRuns:
    """RUNS' results, by name: those `starts` names, run side by side once."""

    def __init__(self, starts: dict[str, Callable[[], Any]]) -> None:
        self._done: dict[str, Future[Any]] = {}
        if not starts:
            return
        with ThreadPoolExecutor(len(starts), thread_name_prefix="session-run") as pool:
            self._done = {name: pool.submit(start) for name, start in starts.items()}
            wait(self._done.values())

    def result(self, name: str, start: Callable[[], Any]) -> Any:
        """Run `name`'s result (its error raised here, to the tests that ask for it), or
        `start()` when it was not started with the others."""
        done = self._done.get(name)
        return done.result() if done is not None else start()
