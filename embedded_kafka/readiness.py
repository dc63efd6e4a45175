"""Readiness by asking the cluster itself (a metadata request), never by sleeping."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient

from dgm.util.errors import UserFacingError

_quiet = logging.getLogger("embedded_kafka.readiness.librdkafka")
_quiet.setLevel(logging.CRITICAL)  # "connection refused" is the expected answer while it boots


class BrokerNotReady(UserFacingError):
    pass


def live_broker_ids(bootstrap_servers: str, timeout: float = 2.0) -> set[int]:
    """The broker ids the cluster's metadata lists as alive, or an empty set if none answers."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "logger": _quiet}
    admin = AdminClient(config)
    try:
        metadata = admin.list_topics(timeout=timeout)
    except Exception:  # KafkaException while nothing listens yet
        return set()
    return set(metadata.brokers)


def cluster_id_of(bootstrap_servers: str, timeout: float = 10.0) -> str:
    """The cluster id the brokers report in metadata (drawn by them in ZooKeeper mode)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "logger": _quiet}
    cluster_id = AdminClient(config).list_topics(timeout=timeout).cluster_id
    return str(cluster_id or "")


def wait_for_brokers(
    bootstrap_servers: str,
    expected: set[int],
    timeout: float,
    still_starting: Callable[[], str | None] = lambda: None,
) -> None:
    """Wait until every broker in `expected` is listed in metadata.

    `still_starting` returns an error text when a broker process has died, so a broker that
    cannot start fails fast with its reason instead of after the whole timeout.
    """
    deadline = time.monotonic() + timeout
    seen: set[int] = set()
    while time.monotonic() < deadline:
        failure = still_starting()
        if failure:
            raise BrokerNotReady(failure)
        seen = live_broker_ids(bootstrap_servers)
        if expected <= seen:
            return
        time.sleep(0.2)
    raise BrokerNotReady(
        f"brokers {sorted(expected - seen)} did not answer a metadata request at "
        f"{bootstrap_servers} within {timeout:.0f}s (alive: {sorted(seen)})"
    )
