"""The lab's faults, done once each: a SIGKILL of the processor where aimed, a rebalance by a
visiting instance, a SIGKILL and restart of the leader broker, fault proxies dropping acks."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from dgm.util.waiting import wait_until
from embedded_kafka.cluster import EmbeddedCluster
from lab.proxy import FaultProxy, proxies_for
from lab.supervisor import Supervisor

FaultKind = Literal["kill", "rebalance", "broker-restart", "drop-acks"]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)
# How long a requested crash waits for the aimed phase; none comes once all is processed.
CRASH_WAIT = 15.0
Progress = Callable[[str], None]


@dataclass(frozen=True)
class FaultDone:
    kind: str
    at: float  # unix time it began
    ended_at: float
    detail: dict[str, Any]


def do_fault(
    kind: str,
    supervisor: Supervisor,
    admin: AdminClient,
    source: str,
    cluster: EmbeddedCluster | None,
    say: Progress,
    crash_wait: float = CRASH_WAIT,
) -> list[FaultDone]:
    """Do one kill, rebalance or broker-restart; what was done (nothing if a crash found no
    aimed phase within `crash_wait`)."""
    began = time.time()
    if kind == "kill":
        crash = supervisor.crash(timeout=crash_wait)
        if crash is None:
            say(f"crash skipped: no aimed phase announced within {crash_wait:.0f}s")
            return []
        return [FaultDone("kill", crash.at, crash.at, {"pid": crash.pid, "phase": crash.phase})]
    if kind == "rebalance":
        visit = supervisor.rebalance()
        return [FaultDone("rebalance", visit.joined_at, visit.left_at, dataclasses.asdict(visit))]
    assert kind == "broker-restart" and cluster is not None
    node_id = wait_until(
        lambda: (found := leader(admin, source, 0)) != -1 and found, 60, f"a leader of {source}[0]"
    )
    say(f"broker restart: SIGKILL broker {node_id} (leader of {source}[0])")
    cluster.stop_broker(node_id, kill=True)
    killed_at = time.time()
    wait_until(lambda: leader(admin, source, 0) not in (node_id, -1), 60, "a new leader")
    cluster.start_broker(node_id)
    say(f"broker restart: broker {node_id} is back")
    detail = {"node_id": node_id, "killed_at": killed_at, "signal": "SIGKILL"}
    return [FaultDone("broker-restart", began, time.time(), detail)]


def leader(admin: AdminClient, topic: str, partition: int) -> int:
    """The partition's leader, or -1 while none is known: also when the metadata request
    times out, as it can while a SIGKILLed broker's partitions are being re-elected."""
    try:
        metadata = admin.list_topics(topic, timeout=10)
    except KafkaException:
        return -1
    found = metadata.topics[topic].partitions.get(partition)
    return -1 if found is None else int(found.leader)


def drop_acks(
    cluster: EmbeddedCluster, probability: float, cleanup: contextlib.ExitStack
) -> list[FaultProxy]:
    """Proxies in front of every broker's FAULT listener that drop Produce responses; stopped
    by `cleanup`. Only a client bootstrapping from `cluster.fault_bootstrap_servers` uses them."""
    proxies = proxies_for(cluster)
    for proxy in proxies:
        cleanup.callback(proxy.stop)
        proxy.drop_produce_responses(probability)
    return proxies
