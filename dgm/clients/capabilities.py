"""What a cluster can answer: its brokers' ApiVersions, as the list of dgm's capabilities.

A capability is what dgm sees through one or more Kafka APIs (DescribeProducers for the
producers of each partition, ListTransactions for open transactions, …). A cluster whose
brokers lack an API, or serve only versions dgm does not count, has a `Gap`, said the way a
missing permission is (dgm.clients.permissions): "cannot see <what> on cluster <name>: the
broker (<version>) has no <API>". A gap is not a failure: dgm works with less, and says what.
docs/compatibility.md ("Capabilities") shows the same table; tests/dgm/clients/
test_capabilities.py holds the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# The events (the `events` sample kind) the collectors record when a cluster's capability goes
# missing and when it comes back, with the Gap's line as detail: a missing permission's way.
CAPABILITY_MISSING = "capability_missing"
CAPABILITY_RESTORED = "capability_restored"

# ApiVersions as a client receives it: API key -> (lowest, highest version served).
ApiVersions = Mapping[int, tuple[int, int]]


@dataclass(frozen=True)
class Api:
    name: str
    key: int
    # The lowest version dgm counts: an earlier one is early access, or lacks what dgm reads.
    counts_from: int = 0
    # Why a served version below `counts_from` does not count (said in the gap).
    below: str = ""


@dataclass(frozen=True)
class Capability:
    name: str
    apis: tuple[Api, ...]
    # What dgm cannot see without it, as the gap's line says it.
    sees: str
    # What dgm does with it, as the page's table says.
    used_for: str
    # The first Apache Kafka line that has it, as dgm counts it.
    since: str

    def api_names(self) -> str:
        return ", ".join(
            api.name + (f" v{api.counts_from}+" if api.counts_from else "") for api in self.apis
        )


LSO = Capability(
    "LSO",
    (Api("ListOffsets", 2, counts_from=2, below="v2 is the first to read read_committed"),),
    "the LSO of any partition",
    "the LSO and LSO lag, transaction-correct consumer lag (ListOffsets read_committed)",
    "0.11",
)
PRODUCERS = Capability(
    "producers",
    (Api("DescribeProducers", 61),),
    "the producers of any partition",
    "producer sessions, epochs and fencing, each open transaction's first offset "
    "(DescribeProducers)",
    "3.0",
)
OPEN_TRANSACTIONS = Capability(
    "open transactions",
    (Api("ListTransactions", 66),),
    "open transactions",
    "the transactional ids and their producers (ListTransactions)",
    "3.0",
)
TRANSACTION_STATES = Capability(
    "transaction states",
    (Api("DescribeTransactions", 65),),
    "hanging transactions",
    "each transaction's state, timeout and partitions: hanging and open transactions "
    "(DescribeTransactions)",
    "3.0",
)
LEADER_EPOCHS = Capability(
    "leader epochs",
    (Api("OffsetForLeaderEpoch", 23),),
    "log truncation at a leader change",
    "the watch's consumer (librdkafka) validates its position after a leader change "
    "(OffsetForLeaderEpoch, KIP-320)",
    "2.1",
)
KIP848_GROUPS = Capability(
    "KIP-848 groups",
    (
        Api(
            "ConsumerGroupHeartbeat",
            68,
            counts_from=1,
            below="v0 is KIP-848's early access; dgm counts it from v1, Kafka 4.0",
        ),
        Api("ConsumerGroupDescribe", 69),
    ),
    "consumer groups of the KIP-848 protocol",
    "members and assignments of groups on the consumer rebalance protocol (ConsumerGroupDescribe)",
    "4.0",
)
SHARE_GROUPS = Capability(
    "share groups",
    (
        Api(
            "ShareGroupDescribe",
            77,
            counts_from=1,
            below="v0 is KIP-932's early access (Kafka 4.0)",
        ),
        Api("DescribeShareGroupOffsets", 90),
    ),
    "share groups",
    "share groups' members and start offsets (ShareGroupDescribe, DescribeShareGroupOffsets): "
    "what a share group's pipeline claims",
    "4.1",
)
CAPABILITIES: tuple[Capability, ...] = (
    LSO,
    PRODUCERS,
    OPEN_TRANSACTIONS,
    TRANSACTION_STATES,
    LEADER_EPOCHS,
    KIP848_GROUPS,
    SHARE_GROUPS,
)


@dataclass(frozen=True)
class Gap:
    """A capability a cluster lacks, and which of its APIs is missing or too old."""

    capability: Capability
    cluster: str
    broker: str  # the brokers' Kafka line as their API versions tell it ("3.6")
    reason: str  # "has no ListTransactions", "has ConsumerGroupHeartbeat v0 only (…)"

    def line(self) -> str:
        """'cannot see open transactions on cluster default: the broker (3.6) has no
        ListTransactions'."""
        return (
            f"cannot see {self.capability.sees} on cluster {self.cluster}: "
            f"the broker ({self.broker}) {self.reason}"
        )

    def fix(self) -> str:
        return f"upgrade the cluster's brokers to Kafka {self.capability.since} or later"


@dataclass(frozen=True)
class ClusterCapabilities:
    cluster: str
    broker: str
    present: tuple[Capability, ...]
    gaps: tuple[Gap, ...]

    def has(self, capability: Capability) -> bool:
        return capability in self.present

    def gap(self, capability: Capability) -> Gap | None:
        return next((g for g in self.gaps if g.capability == capability), None)


def capabilities(versions: ApiVersions, cluster: str, broker: str) -> ClusterCapabilities:
    """What a cluster whose brokers serve `versions` can answer, and what it cannot."""
    present, gaps = [], []
    for capability in CAPABILITIES:
        missing = [api.name for api in capability.apis if api.key not in versions]
        reasons = ["has no " + " and no ".join(missing)] if missing else []
        reasons += [r for r in (_too_old(api, versions) for api in capability.apis) if r]
        if reasons:
            gaps.append(Gap(capability, cluster, broker, "; ".join(reasons)))
        else:
            present.append(capability)
    return ClusterCapabilities(cluster, broker, tuple(present), tuple(gaps))


def _too_old(api: Api, versions: ApiVersions) -> str:
    low, high = versions.get(api.key, (0, api.counts_from))
    if high < api.counts_from:
        shown = f"v{low}" if low == high else f"v{low}-v{high}"
        return f"has {api.name} {shown} only ({api.below})"
    return ""


def common(answers: Iterable[ApiVersions]) -> dict[int, tuple[int, int]]:
    """The versions every broker serves: a cluster answers an API only where each of its
    brokers does (during a rolling upgrade, the oldest broker decides)."""
    found: dict[int, tuple[int, int]] | None = None
    for answer in answers:
        if found is None:
            found = dict(answer)
            continue
        merged = {}
        for key, (low, high) in found.items():
            if key in answer:
                other_low, other_high = answer[key]
                if max(low, other_low) <= min(high, other_high):
                    merged[key] = (max(low, other_low), min(high, other_high))
        found = merged
    return found or {}
