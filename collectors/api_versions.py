"""Each broker's ApiVersions, asked through kafka-python (confluent-kafka does not expose
them), as the cluster's capabilities (dgm.clients.capabilities)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

from collectors.clients import Clients
from dgm.clients.capabilities import ClusterCapabilities, capabilities, common


def ask_capabilities(
    clients: Clients, cluster: str, broker_ids: Iterable[int]
) -> ClusterCapabilities:
    """The capabilities every broker of `broker_ids` (the metadata's) serves; the Kafka line
    shown is the oldest broker's. ClusterUnreachable when one of them does not answer."""
    return clients.using_python_admin(
        "API versions", lambda: _ask(clients.python_admin(), cluster, sorted(broker_ids))
    )


def _ask(admin: Any, cluster: str, broker_ids: list[int]) -> ClusterCapabilities:
    if broker_ids:
        answers = [dict(admin.get_broker_version_data(b).api_versions) for b in broker_ids]
    else:  # no broker in the metadata yet: the one kafka-python bootstrapped from
        answers = [{int(key): served for key, served in admin.api_versions().items()}]
    return capabilities(common(answers), cluster, kafka_line(answers))


# The newest line kafka-python tells from API versions: a newer broker is told as this one.
NEWEST_TOLD = (4, 3)


def kafka_line(answers: list[dict[int, tuple[int, int]]]) -> str:
    """The oldest broker's Kafka line ('3.6'), as its API versions tell it."""
    oldest = min(tuple(infer_broker_version_from_api_versions(answer)) for answer in answers)
    told = ".".join(str(n) for n in oldest[:2])
    return f"{told} or later" if oldest[:2] >= NEWEST_TOLD else told
