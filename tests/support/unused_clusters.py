"""The clusters only some tests ask for (3 brokers, the second cluster, the SASL one), stopped
right after the last test of the run that asks for them (tests/conftest.py's hooks): idle,
their brokers would still take a share of the machine's cores for the rest of the run. The
session's own teardown stops them again, which does nothing then."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import pytest

from tests.support.kafka_cluster import KafkaUnderTest

FIXTURES = ("kafka3", "second_kafka", "kafka_sasl")
Cluster = TypeVar("Cluster")

_stops: dict[str, Callable[[], Any]] = {}  # fixture -> how to stop its running cluster
_last_user: dict[str, int] = {}  # fixture -> position of the last test asking for it
_position: dict[str, int] = {}  # test id -> its position in the run


def stopped_when_unused(name: str, clusters: Iterator[Cluster]) -> Iterator[Cluster]:
    """The one cluster the fixture generator `clusters` yields (stopped when it is resumed),
    stopped early too: after the last test that asks for fixture `name`."""
    for cluster in clusters:
        embedded = getattr(cluster, "embedded", None) or getattr(cluster, "cluster", None)
        if embedded is not None:  # not an external one

            def stop(embedded: Any = embedded, cluster: Any = cluster) -> None:
                if isinstance(cluster, KafkaUnderTest):
                    cluster.forget_admin()  # first: it would go on reconnecting
                # The cluster is thrown away: no clean shutdown to wait for (a 3-broker
                # cluster stopped all at once loses its quorum and waits out the timeout).
                embedded.stop(timeout=5.0)

            _stops[name] = stop
        try:
            yield cluster
        finally:
            _stops.pop(name, None)


def asks_for(item: pytest.Item, name: str) -> bool:
    """Whether `item` uses fixture `name`: in its closure, or through a parameter naming it
    (a fixture that calls request.getfixturevalue(param), as tests/embedded_kafka's)."""
    if name in getattr(item, "fixturenames", ()):
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(isinstance(value, str) and value == name for value in params.values())


def plan(items: Sequence[pytest.Item]) -> None:
    """Note where each test runs and the last test asking for each cluster (`items` in the
    order they run)."""
    _position.clear()
    _last_user.clear()
    for position, item in enumerate(items):
        _position[item.nodeid] = position
        for name in FIXTURES:
            if asks_for(item, name):
                _last_user[name] = position


def after(item: pytest.Item) -> None:
    """Stop each running cluster that no test after `item` asks for."""
    position = _position.get(item.nodeid)
    if position is None:
        return
    for name in list(_stops):
        if position >= _last_user.get(name, -1):
            _stops.pop(name)()
