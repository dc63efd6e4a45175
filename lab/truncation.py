"""A partition truncated for real: acknowledged records vanish and their offsets are reused.

The recipe, on three brokers running Kafka 4.1 (eligible leader replicas, KIP-966, on by
default): a topic with replication factor 2, `min.insync.replicas=1` and
`unclean.leader.election.enable=true`, written by an acks=1 producer.

1. `before` records are written and replicated (the high watermark reaches them).
2. The follower is SIGKILLed: its controller fences it after broker.session.timeout.ms (9 s
   by default) and it leaves the ISR, which is then the leader alone (1 =
   min.insync.replicas, so the follower is not kept as an eligible leader replica).
3. `lost` records are written: acknowledged by the leader, held by no one else; the high
   watermark moves on (an ISR of one is enough).
4. The leader is SIGKILLed, then the follower restarted. The controller fences the dead
   leader and, because the topic allows it, elects the follower though it is out of sync
   (the controller logs an "UNCLEAN partition change"). The high watermark goes back to
   where the follower's log ends: the end of the `before` records.
5. `after` records are written: they take the offsets the lost records had.
6. The old leader restarts, finds a higher leader epoch and truncates its log to the new
   leader's, then replicates the `after` records: the lost records are gone everywhere.

SIGSTOPping the follower instead of killing it truncates as well (SIGCONT it after the
leader's SIGKILL: it is elected as soon as the controller fences the dead leader), but every
client request that lands on the stopped broker waits for its timeout: the Spark Kafka
source's audit of the lost records took a minute. A killed broker refuses connections, and
clients move on.

What does *not* truncate on 4.1: the cluster default `min.insync.replicas=2` (the fixture's),
even with acks=1. There the follower that leaves an ISR of two lands in the eligible leader
replicas, the high watermark stops advancing while the ISR is below 2, and the follower is
elected cleanly from the ELR: the acknowledged records above the high watermark are lost,
but no reader ever saw them and no offset a reader saw is reused (a dgm-seq gap is all that
shows). Truncating audited records needs an unclean election of a replica outside the ISR
and the ELR, which `unclean.leader.election.enable` (or `kafka-leader-election
--election-type unclean`) allows.

Both brokers of the partition are down at once for a while: with three KRaft voters the
metadata quorum stalls until the follower is back, which is why the follower restarts only
after the leader is dead.

The truth is the producers' ledgers (what was acknowledged, at which offset) and two plain
reads of the partition, before the kill and after the old leader is back.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, PartitionMetadata

from dgm.contracts import headers
from dgm.util.waiting import wait_until
from embedded_kafka.cluster import EmbeddedCluster
from lab.ledger import read_ledger
from lab.producer import ProducerSettings, run_producer
from lab.topics import create_topic

Progress = Callable[[str], None]
# What makes an out-of-sync follower electable, and a write with an ISR of one acknowledged.
TOPIC_CONFIG = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}


@dataclass(frozen=True)
class Truncation:
    """What was done and what really happened, as the lab saw it."""

    topic: str
    leader: int  # the first leader: SIGKILLed, restarted, truncated
    follower: int  # paused, then elected out of sync
    high_watermark_before: int  # before the kill
    high_watermark_after: int  # right after the unclean election
    acked: dict[str, int]  # message id -> the offset its acknowledgement named
    before: dict[int, str]  # offset -> message id, read before the kill
    after: dict[int, str]  # offset -> message id, read once the old leader is back
    seconds: float

    @property
    def truncated(self) -> dict[str, int]:
        """Acknowledged records no longer at their offset: the ledger's lost writes."""
        return {i: o for i, o in self.acked.items() if self.after.get(o) != i}

    @property
    def inconsistent(self) -> dict[int, tuple[str, str]]:
        """Offsets whose id differs between the two reads: offset -> (before, after)."""
        return {
            o: (i, self.after[o])
            for o, i in self.before.items()
            if o in self.after and self.after[o] != i
        }


def truncate(
    cluster: EmbeddedCluster,
    admin: AdminClient,
    folder: Path,
    say: Progress = lambda _: None,
    before: int = 100,
    lost: int = 50,
    after: int = 30,
    on_written: Callable[[str], None] = lambda _: None,
    on_truncated: Callable[[str], None] = lambda _: None,
    leader: int = 1,
    follower: int = 2,
) -> Truncation:
    """Truncate a new topic's partition 0 as the module docstring says. `on_written(topic)`
    runs once the lost records are written and read back, before the leader is killed (a
    test audits them there); `on_truncated(topic)` once the `after` records are written,
    while the old leader restarts. Every broker runs again when it returns, or raises."""
    began = time.monotonic()
    # A broker another run restarted may still be rejoining: the recipe needs all of them.
    wait_until(lambda: _registered(admin) == len(cluster.nodes), 120, "every broker registered")
    topic = f"truncated-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, config=TOPIC_CONFIG, replicas=[[leader, follower]])
    servers = {n.node_id: f"127.0.0.1:{n.ports.port}" for n in cluster.nodes}
    # Asked of the broker that is never killed: it answers all along.
    bystander = next(servers[n] for n in sorted(servers) if n not in (leader, follower))
    ledger = folder / f"{topic}.jsonl"
    write(cluster.bootstrap_servers, topic, ledger, before, "before")
    # Each high watermark is asked by a new client: a long-lived one that met the brokers
    # other runs restarted answered nothing for minutes on a busy machine.
    wait_until(
        lambda: high_watermark_of(bystander, topic) == before, 120, "the follower to replicate"
    )
    say(f"{before} records replicated to brokers {leader} and {follower}")
    down = {follower}
    cluster.stop_broker(follower, kill=True)
    try:
        wait_until(lambda: isr(bystander, topic) == [leader], 60, f"{follower} to leave the ISR")
        say(f"broker {follower} killed, out of the ISR")
        write(servers[leader], topic, ledger, lost, "lost")
        hw_before = before + lost
        wait_until(lambda: high_watermark_of(servers[leader], topic) == hw_before, 30, "the HW")
        seen_before = read_ids(servers[leader], topic, hw_before)
        on_written(topic)
        cluster.stop_broker(leader, kill=True)
        down.add(leader)
        cluster.start_broker(follower)
        down.discard(follower)
        say(f"broker {leader} killed, broker {follower} restarted")
        wait_until(
            lambda: leader_of(bystander, topic) == follower, 90, f"{follower} elected uncleanly"
        )
        (hw_after,) = wait_until(
            lambda: answered(high_watermark_of(bystander, topic)), 30, "the new leader's HW"
        )
        say(f"broker {follower} leads {topic}; high watermark {hw_before} -> {hw_after}")
        write(servers[follower], topic, ledger, after, "after")
        # The old leader restarts while the caller looks at the truncated partition.
        restart = threading.Thread(target=cluster.start_broker, args=(leader,), daemon=True)
        restart.start()
        on_truncated(topic)
        restart.join()
        down.discard(leader)
        wait_until(
            lambda: sorted(isr(bystander, topic) or []) == sorted((leader, follower)),
            90,
            f"broker {leader} to truncate and rejoin the ISR",
        )
        seen_after = read_ids(cluster.bootstrap_servers, topic, hw_after + after)
        say(f"broker {leader} back in the ISR")
    finally:
        if down:
            cluster.start_stopped()
    acked = {
        e.message_id: e.offset
        for e in read_ledger(ledger).entries
        if e.event == "acked" and e.offset is not None
    }
    return Truncation(
        topic, leader, follower, hw_before, hw_after, acked, seen_before, seen_after,
        time.monotonic() - began,
    )  # fmt: skip


def write(servers: str, topic: str, ledger: Path, count: int, session: str) -> None:
    """`count` stamped records, acks=1 and no retries, into the ledger (lab.producer)."""
    settings = ProducerSettings(
        servers, topic, count, ledger, acks="1", retries=0, enable_idempotence=False,
        session=f"{session}-{uuid.uuid4().hex[:6]}", client={"message.timeout.ms": "30000"},
    )  # fmt: skip
    result = run_producer(settings)
    if result.acked != count:
        raise AssertionError(f"{session}: {result.acked} of {count} records acknowledged")


def isr(servers: str, topic: str) -> list[int] | None:
    """Partition 0's ISR as the metadata of a broker of `servers` says; None if none answers."""
    found = _partition(servers, topic)
    return None if found is None else sorted(found.isrs)


def leader_of(servers: str, topic: str) -> int | None:
    found = _partition(servers, topic)
    return None if found is None else int(found.leader)


def _partition(servers: str, topic: str) -> PartitionMetadata | None:
    # A fresh client each time: its first request can only go to `servers`.
    try:
        metadata = AdminClient({"bootstrap.servers": servers}).list_topics(topic, timeout=5)
    except KafkaException:
        return None
    return metadata.topics[topic].partitions.get(0)


def answered(offset: int | None) -> tuple[int] | None:
    """(offset,) once an offset is known (a 1-tuple, so offset 0 counts); a new leader answers
    OFFSET_INVALID (-1001) while it recovers."""
    return None if offset is None or offset < 0 else (offset,)


def _registered(admin: AdminClient) -> int:
    """How many brokers the cluster's metadata lists (those registered and not fenced)."""
    try:
        return len(admin.list_topics(timeout=5).brokers)
    except KafkaException:
        return 0


def high_watermark_of(servers: str, topic: str) -> int | None:
    """Partition 0's high watermark from its leader, found through `servers`; None if no answer."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "dgm-lab-truncation"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1])
    except KafkaException:
        return None
    finally:
        consumer.close()


def read_ids(servers: str, topic: str, end: int) -> dict[int, str]:
    """offset -> dgm-id of partition 0's records below `end`, read_uncommitted."""
    consumer = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": f"dgm-lab-truncation-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    found: dict[int, str] = {}
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def done() -> bool:
            for message in consumer.consume(500, 0.5):
                if message.error() is None and (offset := message.offset()) is not None:
                    found[offset] = headers.header_map(message.headers())[headers.ID].decode()
            return max(found, default=-1) >= end - 1

        wait_until(done, 30, f"{topic}'s records below {end}", interval=0)
    finally:
        consumer.close()
    return found
