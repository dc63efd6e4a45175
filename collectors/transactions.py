"""Transaction sampler: active producers per partition and the state of each transactional id.

Through kafka-python, the only Python client with DescribeProducers (one request per
partition leader), ListTransactions (one per broker) and DescribeTransactions (one per
coordinator). Hanging transactions are flagged with `collectors.hanging`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kafka import TopicPartition
from kafka.errors import (
    BrokerResponseError,
    KafkaError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)

from collectors.access import is_denied
from collectors.clients import Clients
from collectors.hanging import CoordinatorView, OpenTransaction, hanging_reason
from collectors.partitions import ClusterView
from collectors.txn_sessions import TxnSeen, seen_of
from dgm.clients.permissions import (
    CLUSTER_DESCRIBE_CONFIGS,
    TOPIC_READ,
    TRANSACTIONAL_ID_DESCRIBE,
    Denial,
)
from dgm.contracts.samples import Key

log = logging.getLogger(__name__)

OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


@dataclass(frozen=True)
class ProducersRow:
    """One row of the `producers` sample kind (see dgm.contracts.sample_schemas.PRODUCERS)."""

    sampled_at: datetime
    cluster_id: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: datetime | None
    coordinator_epoch: int
    txn_start_offset: int | None
    transactional_id: str | None
    idle_ms: int | None
    hanging: bool
    hanging_reason: str | None


@dataclass(frozen=True)
class TransactionsRow:
    """One row of the `transactions` sample kind (see dgm.contracts.sample_schemas.TRANSACTIONS)."""

    sampled_at: datetime
    cluster_id: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    transaction_timeout_ms: int
    transaction_start: datetime | None
    open_ms: int | None
    timed_out: bool
    coordinator_id: int
    partitions: list[dict[str, Any]]


@dataclass
class TransactionSample:
    producers: list[ProducersRow] = field(default_factory=list)
    transactions: list[TransactionsRow] = field(default_factory=list)
    unavailable: int = 0  # partitions whose producers could not be read this cycle
    denied: list[Denial] = field(default_factory=list)  # topics, transactional ids refused
    # The cluster's finalized transaction.version (2: KIP-890's V2 possible); None: unknown.
    transaction_version: int | None = None

    def open_transactions(self) -> int:
        return sum(1 for p in self.producers if p.txn_start_offset is not None)

    def transactional_epochs(self) -> dict[str, TxnSeen]:
        return {
            t.transactional_id: seen_of(
                t.producer_id,
                t.producer_epoch,
                t.state,
                t.transaction_start,
                self.transaction_version,
                t.timed_out,
            )
            for t in self.transactions
        }

    def idempotent_epochs(self) -> dict[int, int]:
        """Highest epoch per producer id that no transactional id holds."""
        epochs: dict[int, int] = {}
        for p in self.producers:
            if p.transactional_id is None:
                epochs[p.producer_id] = max(p.producer_epoch, epochs.get(p.producer_id, -1))
        return epochs


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def _time(ms: int) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, UTC) if ms >= 0 else None


def producers_rows(
    states: Mapping[Key, Iterable[Any]],
    transactional_ids: Mapping[int, str],
    coordinators: Mapping[str, CoordinatorView],
    max_transaction_timeout_ms: int,
    sampled_at: datetime,
    cluster_id: str,
) -> list[ProducersRow]:
    """Rows for DescribeProducers' answers (objects with kafka-python's ProducerState fields)."""
    now_ms = _ms(sampled_at)
    rows = []
    for (topic, partition), producers in sorted(states.items()):
        for p in producers:
            txn_id = transactional_ids.get(p.producer_id)
            start = p.current_transaction_start_offset
            idle = now_ms - p.last_timestamp if p.last_timestamp >= 0 else None
            reason = None
            if start >= 0 and p.last_timestamp >= 0:
                txn = OpenTransaction(
                    topic, partition, p.producer_id, p.producer_epoch, p.last_timestamp
                )
                coordinator = coordinators.get(txn_id) if txn_id is not None else None
                reason = hanging_reason(
                    txn, now_ms, max_transaction_timeout_ms, txn_id, coordinator
                )
            rows.append(
                ProducersRow(
                    sampled_at, cluster_id, topic, partition, p.producer_id, p.producer_epoch,
                    p.last_sequence, _time(p.last_timestamp), p.coordinator_epoch,
                    start if start >= 0 else None, txn_id, idle, reason is not None, reason,
                )
            )  # fmt: skip
    return rows


def transactions_rows(
    descriptions: Mapping[str, Any], sampled_at: datetime, cluster_id: str
) -> list[TransactionsRow]:
    """Rows for DescribeTransactions' answers (kafka-python TransactionDescription fields)."""
    rows = []
    for txn_id, d in sorted(descriptions.items()):
        state = d.state.value
        start = d.transaction_start_time_ms
        open_ms = _ms(sampled_at) - start if state in OPEN_STATES and start >= 0 else None
        rows.append(
            TransactionsRow(
                sampled_at, cluster_id, txn_id, d.producer_id, d.producer_epoch, state,
                d.transaction_timeout_ms, _time(start), open_ms,
                open_ms is not None and open_ms > d.transaction_timeout_ms, d.coordinator_id,
                [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(
                    d.topic_partitions, key=lambda tp: (tp.topic, tp.partition))],
            )
        )  # fmt: skip
    return rows


def coordinator_views(descriptions: Mapping[str, Any]) -> dict[str, CoordinatorView]:
    return {
        txn_id: CoordinatorView(
            d.producer_id,
            d.producer_epoch,
            frozenset((tp.topic, tp.partition) for tp in d.topic_partitions),
            d.state.value,
        )
        for txn_id, d in descriptions.items()
    }


def fetch_transactions(
    clients: Clients,
    view: ClusterView,
    max_transaction_timeout_ms: int,
    sampled_at: datetime,
    cluster_id: str,
) -> TransactionSample:
    return clients.using_python_admin(
        "transactions",
        lambda: _fetch(clients, view, max_transaction_timeout_ms, sampled_at, cluster_id),
    )


def _fetch(
    clients: Clients,
    view: ClusterView,
    max_transaction_timeout_ms: int,
    sampled_at: datetime,
    cluster_id: str,
) -> TransactionSample:
    admin = clients.python_admin()
    # The coordinators first, the partitions after: a partition's view then is never older
    # than its coordinator's, so a transaction ended in between is not mistaken for hanging.
    listings = admin.list_transactions()
    transactional_ids = {
        t.producer_id: t.transactional_id for found in listings.values() for t in found
    }
    denied: list[Denial] = []
    descriptions = _describe(admin, sorted(set(transactional_ids.values())), denied)
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for p in view.partitions:
        if p.leader is not None:
            by_leader[p.leader].append(TopicPartition(p.topic, p.partition))
    states: dict[Key, Any] = {}
    for leader, partitions in sorted(by_leader.items()):
        states.update(_producers(admin, leader, partitions, denied))
    return TransactionSample(
        producers_rows(
            states,
            transactional_ids,
            coordinator_views(descriptions),
            max_transaction_timeout_ms,
            sampled_at,
            cluster_id,
        ),
        transactions_rows(descriptions, sampled_at, cluster_id),
        unavailable=len(view.partitions) - len(states),
        denied=denied,
        transaction_version=_transaction_version(admin),
    )


def _transaction_version(admin: Any) -> int | None:
    """The finalized level of the cluster's transaction.version feature (ApiVersions); None
    when the cluster has no such feature (ZooKeeper mode, 3.x before it) or does not say."""
    try:
        features = admin.describe_features()
    except KafkaError as error:
        log.debug("features not answered: %s", error)
        return None
    # kafka-python: feature name -> {"supported": (min, max), "finalized": (min, max), ...}
    finalized = features.get("transaction.version", {}).get("finalized")
    return None if finalized is None else int(finalized[1])


def _producers(
    admin: Any, leader: int, partitions: list[TopicPartition], denied: list[Denial]
) -> dict[Key, Any]:
    """DescribeProducers of one leader's partitions. kafka-python raises for the whole batch
    when one topic is refused (it needs Read): then one topic at a time, each refused topic a
    Denial, so it costs no other topic its producers."""
    try:
        answer = admin.describe_producers(partitions, broker_id=leader)
    except TopicAuthorizationFailedError:
        by_topic: dict[str, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            by_topic[tp.topic].append(tp)
        if len(by_topic) == 1:
            denied.append(Denial(TOPIC_READ, partitions[0].topic))
            return {}
        found: dict[Key, Any] = {}
        for topic_partitions in by_topic.values():
            found.update(_producers(admin, leader, topic_partitions, denied))
        return found
    except BrokerResponseError:  # e.g. leadership moved since the metadata: next cycle
        return {}
    return {(tp.topic, tp.partition): s.active_producers for tp, s in answer.items()}


def _describe(admin: Any, transactional_ids: list[str], denied: list[Denial]) -> dict[str, Any]:
    """DescribeTransactions for all ids; one at a time if the batch fails on one of them
    (kafka-python raises for the whole batch, e.g. when an id expired since the listing, or
    one is refused: a Denial)."""
    if not transactional_ids:
        return {}
    try:
        return dict(admin.describe_transactions(transactional_ids))
    except BrokerResponseError:
        found = {}
        for txn_id in transactional_ids:
            try:
                found.update(admin.describe_transactions([txn_id]))
            except TransactionalIdAuthorizationFailedError:
                denied.append(Denial(TRANSACTIONAL_ID_DESCRIBE, txn_id))
            except BrokerResponseError:
                continue
        return found


def max_transaction_timeout_ms(
    admin: Any, broker_id: int, timeout_s: float
) -> tuple[int | None, Denial | None]:
    """The broker's transaction.max.timeout.ms (confluent AdminClient), None if unreadable;
    and the Denial when it is unreadable for want of DescribeConfigs on the cluster."""
    from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]

    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    try:
        configs = admin.describe_configs([resource], request_timeout=timeout_s)
        entries = configs[resource].result(timeout=timeout_s + 5)
        return int(entries["transaction.max.timeout.ms"].value), None
    except Exception as error:  # an old broker or no DescribeConfigs permission: the default
        return None, Denial(CLUSTER_DESCRIBE_CONFIGS) if is_denied(error) else None
