"""One sampling cycle: sample everything, derive events against the previous cycle, write.

The previous cycle's state (LSO since, group members, producer epochs) lives in memory and
is rebuilt after a restart from the newest sample files, so a restart neither forgets how
long an LSO has been stuck nor invents events.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from collectors.api_versions import ask_capabilities
from collectors.clients import Clients, ClusterUnreachable
from collectors.events import (
    Event,
    GroupView,
    MemberView,
    authorization_events,
    backwards_events,
    broker_events,
    capability_events,
    group_events,
    idempotent_epoch_events,
    topic_events,
    transactional_epoch_events,
)
from collectors.groups import fetch_groups, group_offsets_rows, with_share_groups
from collectors.hanging import DEFAULT_MAX_TRANSACTION_TIMEOUT_MS
from collectors.lso import LsoState
from collectors.offsets import fetch_offsets, offsets_rows
from collectors.partitions import ClusterView, check_matches, describe_cluster
from collectors.share_groups import ShareSample
from collectors.share_sampler import ShareGroupSampler
from collectors.transactions import fetch_transactions, max_transaction_timeout_ms
from collectors.txn_sessions import TxnSeen, carried, seen_of
from dgm.clients.capabilities import Gap
from dgm.clients.permissions import Denial
from dgm.config.collectors import CollectorSettings
from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.contracts.samples import Key, PartitionOffsets, SampleStore, latest_rows

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CycleSummary:
    partitions: int
    unavailable: int
    groups: int
    open_transactions: int
    hanging: int
    events: int
    seconds: float

    def line(self) -> str:
        missed = f" ({self.unavailable} unavailable)" if self.unavailable else ""
        hanging = f", {self.hanging} HANGING" if self.hanging else ""
        return (
            f"sampled {self.partitions} partitions{missed}, {self.groups} groups, "
            f"{self.open_transactions} open transactions{hanging}, {self.events} events "
            f"in {self.seconds:.2f}s"
        )


def utc_now() -> datetime:
    """Now, to the millisecond: the precision of the samples' timestamps."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


class Collector:
    """Samples one cluster cycle after cycle, into one sample store."""

    def __init__(
        self,
        clients: Clients,
        settings: CollectorSettings,
        store: SampleStore,
        request_timeout_s: float = 10.0,
        max_transaction_timeout_ms: int | None = None,
        sample_writers: int = 1,
        expected_topics: tuple[str, ...] = (),
        expected_groups: tuple[str, ...] = (),
        cluster_name: str = DEFAULT_CLUSTER,
    ) -> None:
        self.clients = clients
        self.cluster_name = cluster_name  # as the config names it, in capability gaps' lines
        self.gaps: frozenset[Gap] = frozenset()  # what the brokers could not answer last cycle
        # The pipelines' topics and groups: a listing leaves out what dgm may not describe,
        # so these are asked for by name, and a refusal is recorded instead of unnoticed.
        self.expected_topics = expected_topics
        self.expected_groups = expected_groups
        self.denied: frozenset[Denial] = frozenset()  # refusals of the previous cycle
        self.cluster_denied: frozenset[Denial] = frozenset()  # of the start
        self.settings = settings
        self.store = store
        self.request_timeout_s = request_timeout_s
        self.max_transaction_timeout_ms = max_transaction_timeout_ms
        self.cluster_id: str | None = None
        self.lso_states: dict[Key, LsoState] = {}
        self.groups: dict[str, GroupView] = {}
        self.transactional_epochs: dict[str, TxnSeen] = {}
        self.idempotent_epochs: dict[int, int] = {}
        self.share_groups = ShareGroupSampler(clients)
        self.brokers: frozenset[int] | None = None
        self.topic_ids: dict[str, str] = {}
        # The last offsets each partition answered, kept while it does not answer: a
        # truncation is often seen across the cycles its partition had no leader.
        self.offsets: dict[Key, PartitionOffsets] = {}
        # Collectors of other clusters writing into the same store
        # (dgm.contracts.samples.latest_rows).
        self.sample_writers = sample_writers

    def connect(self, timeout_s: float | None = None) -> ClusterView:
        """Metadata; the first time also the cluster's identity, restored state and checks."""
        timeout_s = self.request_timeout_s if timeout_s is None else timeout_s
        view = describe_cluster(self.clients.admin, self.settings, timeout_s, self.expected_topics)
        if self.cluster_id is None:
            check_matches(view, self.settings)
            self.cluster_id = view.cluster_id
            self._restore(view.cluster_id)
            if self.max_transaction_timeout_ms is None and view.brokers:
                self.max_transaction_timeout_ms, denied = max_transaction_timeout_ms(
                    self.clients.admin, min(view.brokers), self.request_timeout_s
                )
                self.cluster_denied = frozenset([denied] if denied else [])
            self.record([Event(utc_now(), view.cluster_id, "collector_start", self._started())])
        return view

    def cycle(self, should_stop: Callable[[], bool] = lambda: False) -> CycleSummary | None:
        """Sample, derive, write; None if asked to stop before anything was written."""
        began = time.monotonic()
        view = self.connect()
        self.share_groups.ask()  # answered beside the cycle (share_sampler says why)
        at, cluster_id = utc_now(), view.cluster_id
        # Committed offsets before partition offsets: a read_committed consumer's committed
        # offset never passes the LSO, and offsets only grow, so lag never comes out negative.
        groups = fetch_groups(
            self.clients, self.request_timeout_s, at, cluster_id, self.expected_groups
        )
        fetched, unavailable = fetch_offsets(
            self.clients.admin, view.partitions, self.request_timeout_s
        )
        groups = with_share_groups(
            groups, self._share_answer(began), self.share_groups.views, at, cluster_id
        )
        txns = fetch_transactions(
            self.clients,
            view,
            self.max_transaction_timeout_ms or DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
            at,
            cluster_id,
        )
        if should_stop():
            return None
        offsets, lso_states = offsets_rows(fetched, self.lso_states, at, cluster_id, view.topic_ids)
        by_key = {(p.topic, p.partition): p for p in fetched}
        recreated = {
            topic
            for topic, topic_id in view.topic_ids.items()
            if self.topic_ids.get(topic) not in (None, topic_id)
        }
        # A topic whose id did not answer this cycle may have been recreated unseen.
        unknown = {p.topic for p in fetched if p.topic not in view.topic_ids}
        denied = frozenset((*self.cluster_denied, *view.denied, *groups.denied, *txns.denied))
        gaps = self._capability_gaps(view)
        # Each transactional id with the protocol (V1, V2) learned so far (txn_sessions).
        seen = carried(self.transactional_epochs, txns.transactional_epochs())
        events = [
            *authorization_events(self.denied, denied, at, cluster_id),
            *capability_events(self.gaps, gaps, at, cluster_id),
            *broker_events(self.brokers, view.brokers, at, cluster_id),
            *topic_events(self.topic_ids, view.topic_ids, at, cluster_id),
            *group_events(self.groups, groups.views, at, cluster_id),
            *transactional_epoch_events(self.transactional_epochs, seen, at, cluster_id),
            *idempotent_epoch_events(
                self.idempotent_epochs, txns.idempotent_epochs(), at, cluster_id
            ),
            *backwards_events(self.offsets, fetched, at, cluster_id, recreated | unknown),
        ]
        # Writes are not interrupted: a stop request waits for the last of them.
        self.store.write("offsets", offsets)
        self.store.write("group_offsets", group_offsets_rows(groups, by_key, at, cluster_id))
        self.store.write("group_members", groups.members)
        self.store.write("producers", txns.producers)
        self.store.write("transactions", txns.transactions)
        self.record(events)
        self.lso_states = lso_states
        self.groups = groups.views
        self.transactional_epochs = seen
        # Producer ids that left the partitions' state keep their last epoch: a bump seen
        # after a quiet cycle still counts.
        self.idempotent_epochs = {**self.idempotent_epochs, **txns.idempotent_epochs()}
        self.brokers = view.brokers
        self.topic_ids = {**self.topic_ids, **view.topic_ids}
        # Offsets of a topic whose id did not answer stay as they were: next cycle tells a
        # truncation from a recreation.
        self.offsets = {
            **{k: v for k, v in self.offsets.items() if k[0] not in recreated},
            **{k: v for k, v in by_key.items() if k[0] not in unknown or k not in self.offsets},
        }
        self.denied = denied
        self.gaps = gaps
        return CycleSummary(
            partitions=len(fetched),
            unavailable=unavailable,
            groups=len(groups.views),
            open_transactions=txns.open_transactions(),
            hanging=sum(1 for p in txns.producers if p.hanging),
            events=len(events),
            seconds=time.monotonic() - began,
        )

    def _share_answer(self, began: float) -> ShareSample | None:
        """The share groups' answer if it comes before this cycle's interval is up; the first
        one is waited for as any request is, so a restart's first cycle knows them."""
        if not self.share_groups.heard_back:
            return self.share_groups.answer(self.request_timeout_s)
        return self.share_groups.answer(began + self.settings.interval_s - time.monotonic())

    def _capability_gaps(self, view: ClusterView) -> frozenset[Gap]:
        """What the brokers' API versions lack (asked every cycle: an upgrade changes them);
        the last cycle's when they do not answer, which is no gap of theirs."""
        try:
            found = ask_capabilities(self.clients, self.cluster_name, view.brokers)
        except ClusterUnreachable as error:
            log.debug("API versions not answered, capabilities kept: %s", error)
            return self.gaps
        return frozenset(found.gaps)

    def record(self, events: Sequence[Event]) -> None:
        if events:
            self.store.write("events", events)

    def _started(self) -> str:
        timeout = self.max_transaction_timeout_ms
        return (
            f"collector started: interval {self.settings.interval_s:g}s, include "
            f"{list(self.settings.include_topics)}, exclude {list(self.settings.exclude_topics)}, "
            f"max transaction timeout {timeout if timeout is not None else 'unknown'} ms"
        )

    def _restore(self, cluster_id: str) -> None:
        for row in latest_rows(self.store, "offsets", cluster_id, self.sample_writers):
            self.lso_states[(row["topic"], row["partition"])] = LsoState(
                row["lso"], row["lso_since"]
            )
            if row.get("topic_id") is not None:
                self.topic_ids[row["topic"]] = row["topic_id"]
            self.offsets[(row["topic"], row["partition"])] = PartitionOffsets(
                row["topic"], row["partition"], row["log_start_offset"], row["high_watermark"],
                row["lso"], row["leader"], row.get("leader_epoch"),
            )  # fmt: skip
        members: dict[str, dict[str, MemberView]] = {}
        states: dict[str, str] = {}
        for row in latest_rows(self.store, "group_members", cluster_id, self.sample_writers):
            states[row["group_id"]] = row["group_state"]
            group = members.setdefault(row["group_id"], {})
            if row["member_id"] is not None:
                assignment = frozenset((a["topic"], a["partition"]) for a in row["assignment"])
                group[row["member_id"]] = MemberView(row["member_id"], row["client_id"], assignment)
        self.groups = {gid: GroupView(states[gid], members[gid]) for gid in states}
        for row in latest_rows(self.store, "transactions", cluster_id, self.sample_writers):
            self.transactional_epochs[row["transactional_id"]] = seen_of(
                row["producer_id"], row["producer_epoch"], row["state"], row["transaction_start"]
            )
        for row in latest_rows(self.store, "producers", cluster_id, self.sample_writers):
            if row["transactional_id"] is None:
                pid = row["producer_id"]
                self.idempotent_epochs[pid] = max(
                    row["producer_epoch"], self.idempotent_epochs.get(pid, -1)
                )
