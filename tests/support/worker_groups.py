"""The suite in two pytest-xdist workers (README, "Tests"), each session server started once.

Every test of a server (broker, Spark, PostgreSQL, schema registry) runs in one worker, in
the order conftest gives them: those that need only Spark first, while the second worker
runs the tests that need no server (~5 minutes of about one core). The kill-timed lab runs
of the broker tests (a relay SIGKILLed between produce and commit) come after that, on a
machine as quiet as in one process: beside a second Spark, two runs in three found nothing
uncommitted at their kills or stalled. A test's group comes from the server fixtures it
uses, which only a worker knows (it collects); the controller schedules. So each worker
writes the groups it found to one file the controller named (GROUPS_ENV), and the
controller's scheduler reads them when it splits the tests into units of work.

xdist's own `loadgroup` does this by renaming the node ids, which pytest 9.2 no longer lets a
plugin do (pytest-dev/pytest-xdist#1386): every test would run anywhere, and each worker
would start its own brokers.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from xdist.scheduler import LoadScopeScheduling

GROUPS_ENV = "DGM_TEST_WORKER_GROUPS"


def group_of(servers: Collection[str]) -> str | None:
    """The group of a test marked with `servers` (conftest's SERVER_FIXTURES markers)."""
    return "servers" if servers else None


def spark_only_first(servers: Collection[str]) -> int:
    """A sort key for the run order: the tests that need only Spark before the others."""
    return 0 if set(servers) == {"spark"} else 1


_named: list[str] = []  # the file this process named, removed at its end


def name_the_file() -> None:
    """In the controller, before the workers start (they inherit the environment)."""
    if GROUPS_ENV not in os.environ:
        handle, path = tempfile.mkstemp(prefix="dgm-test-groups-", suffix=".json")
        os.close(handle)
        os.environ[GROUPS_ENV] = path
        _named.append(path)


def remove_the_file() -> None:
    """In the controller, at the end: the file it named, if any."""
    while _named:
        Path(_named.pop()).unlink(missing_ok=True)
        os.environ.pop(GROUPS_ENV, None)


def write_groups(groups: Iterable[tuple[str, str]]) -> None:
    """In a worker: (node id, group) of the grouped tests. Every worker collects the same
    tests, so each writes the same file whole (a rename: never half read)."""
    path = os.environ.get(GROUPS_ENV)
    if not path:
        return
    temp = Path(f"{path}.{os.getpid()}")
    temp.write_text(json.dumps(dict(groups)))
    os.replace(temp, path)


class ServerGroups(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's scope scheduling with a unit of work per group, a test alone otherwise; the
    largest unit goes first (xdist's default): the servers' tests start in one worker."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # read once, after every worker has collected
            path = os.environ.get(GROUPS_ENV)
            text = Path(path).read_text() if path and Path(path).exists() else ""
            self._groups = json.loads(text) if text else {}
        return self._groups.get(nodeid, nodeid)
