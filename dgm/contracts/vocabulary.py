"""The words of docs/design.md that the analysis publishes and every reader shows.

One `str` enum per kind of word, each member equal to the text in the published tables, so a
reader compares a column with `Achieved.EXACTLY_ONCE` and never types the word again (the
layout test fails on such a literal outside this module). Severities order the words for
colours, sorting and alert metrics; the analysis' rules that choose a word live in
spark_jobs/analyze (verdict, duplicates, loss, group_status).
"""

from __future__ import annotations

from enum import StrEnum


class Achieved(StrEnum):
    """The semantic a pipeline achieved over a window: its verdict (docs/design.md, "verdict")."""

    EXACTLY_ONCE = "exactly-once"
    AT_LEAST_ONCE = "at-least-once"
    AT_MOST_ONCE = "at-most-once"
    NO_GUARANTEE = "no guarantee"
    INSUFFICIENT_EVIDENCE = "insufficient evidence"

    @property
    def judged(self) -> bool:
        """False for insufficient evidence: no semantic can be named yet."""
        return self is not Achieved.INSUFFICIENT_EVIDENCE


# The semantics a pipeline may declare in dgm.toml (`declared_semantic`).
DECLARABLE: tuple[Achieved, ...] = (
    Achieved.AT_MOST_ONCE,
    Achieved.AT_LEAST_ONCE,
    Achieved.EXACTLY_ONCE,
)

# achieved -> the declared semantics it meets. at-most-once and at-least-once are not ordered
# against each other: each meets only itself; exactly-once meets all; no guarantee none.
MEETS: dict[Achieved, frozenset[Achieved]] = {
    Achieved.EXACTLY_ONCE: frozenset(DECLARABLE),
    Achieved.AT_LEAST_ONCE: frozenset({Achieved.AT_LEAST_ONCE}),
    Achieved.AT_MOST_ONCE: frozenset({Achieved.AT_MOST_ONCE}),
    Achieved.NO_GUARANTEE: frozenset(),
}


class Evidence(StrEnum):
    """How strong a verdict's evidence is (docs/design.md, "verdict")."""

    TESTED = "tested"  # faults were seen while the checked records flowed
    UNTESTED = "untested"  # nothing went wrong meanwhile: weaker evidence
    NONE = "none"  # nothing was checked


class DuplicateCause(StrEnum):
    """Why a duplicate exists (docs/design.md, "cause"), in precedence order: when several
    apply to one id, the first one listed names it."""

    ABORTED_READ = "aborted read"
    PRODUCER_RETRY = "producer retry"
    REPROCESSING = "reprocessing"
    # a share group's reprocessing (KIP-932): the group delivered the record again, its
    # acquisition lock expired or its consumer gone before it was acknowledged
    REDELIVERY = "redelivery"
    UPSTREAM = "upstream"
    UNKNOWN = "unknown"  # no header evidence for any cause (a pipeline stamping nothing)


class LossCause(StrEnum):
    """Why a record counts as lost (docs/design.md, "lost")."""

    NOT_IN_SINK = "not in sink"
    SEQUENCE_GAP = "sequence gap"
    # a deadline claim's loss: no sink copy by the time the record is older than max_delay
    NOT_IN_SINK_WITHIN_MAX_DELAY = "not in sink within max_delay"
    # the sink holds the id only in aborted transactions, yet the claim covers its source
    # record: the processor's offsets committed while its output aborted (named first)
    TORN_COMMIT = "torn commit"
    # the record (or its only sink copy) was audited at an offset Kafka no longer holds it at:
    # its log was truncated (docs/design.md, "truncated record")
    TRUNCATION = "truncation"
    # a share group's loss: below its share-partition start offset, so the group acknowledged
    # it, or archived it (rejected, or out of delivery attempts: Kafka does not say which),
    # and no sink copy exists
    ACKNOWLEDGED_OR_ARCHIVED = "acknowledged or archived"


class OrderAnomaly(StrEnum):
    """A record out of order (docs/design.md, "Order, beside the delivery semantic"); order
    is judged beside the verdict, never part of it."""

    OUT_OF_ORDER = "out of order"  # a producer session's dgm-seq fell within a partition
    SINK_OUT_OF_ORDER = "sink out of order"  # a source partition's copies fell in a sink one


class Anomaly(StrEnum):
    """What a re-read of audited offsets finds when a log was rewritten (docs/design.md,
    "Log integrity"); `jepsen` is the nearest name Jepsen's Kafka checker gives it."""

    TRUNCATED_RECORD = "truncated record"
    INCONSISTENT_OFFSET = "inconsistent offset"

    @property
    def jepsen(self) -> str:
        return _JEPSEN[self]


_JEPSEN = {
    Anomaly.TRUNCATED_RECORD: "lost-write",
    Anomaly.INCONSISTENT_OFFSET: "inconsistent-offsets",
}


class GroupType(StrEnum):
    """Which protocol a group speaks: the samples' and the published `group_type`."""

    CLASSIC = "classic"
    CONSUMER = "consumer"  # KIP-848's rebalance protocol
    SHARE = "share"  # a share group (KIP-932; docs/design.md, "Share groups")


class ClaimKind(StrEnum):
    """What a pipeline's `claim` setting names (dgm.toml; docs/design.md, "claim"): which
    source records should already be in its sink."""

    GROUP = "group"  # below its consumer group's committed offset (or its sink's offsets)
    DEADLINE = "deadline"  # older than its max_delay


class Claim(StrEnum):
    """The claim a verdict's records were checked against (the published `claim`)."""

    GROUP_COMMITS = "group commits"
    # a share group's acknowledgements: the records below its share-partition start offsets
    SHARE_ACKNOWLEDGEMENTS = "share acknowledgements"
    SINK_OFFSETS = "sink offsets"  # an external sink's stored offsets (with any group's)
    DEADLINE = "deadline"


class GroupStatus(StrEnum):
    """A consumer group's (or partition's) status by Burrow's rules (docs/design.md,
    "Consumer-group status"); a group takes its worst partition's."""

    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"
    ERR = "ERR"
    REWIND = "REWIND"

    @property
    def severity(self) -> int:
        """0 OK … 5 REWIND: the group_status alert metric and the published `severity`."""
        return _GROUP_SEVERITY[self]

    @property
    def stalled(self) -> bool:
        """The consumer is not keeping up (anything worse than WARN)."""
        return self.severity > GroupStatus.WARN.severity


_GROUP_SEVERITY: dict[GroupStatus, int] = {status: n for n, status in enumerate(GroupStatus)}


def listing(words: type[StrEnum], sep: str = " | ") -> str:
    """Every word of one kind in declaration order, as the published docs list them."""
    return sep.join(member.value for member in words)


def severity_legend() -> str:
    """'0 OK, 1 WARN, …': the group statuses as the severity numbers alerts and metrics show."""
    return ", ".join(f"{status.severity} {status.value}" for status in GroupStatus)
