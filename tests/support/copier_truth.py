"""What a transactional copier run (lab/txn_copier) did, told without dgm's analysis: an
independent read of its topics (read_committed and read_uncommitted) against the lab
producer's ledger, and its producer sessions from the sink's record batches (read with the
audit's own Fetch walker). tests/scenarios/test_transactions_versions.py and the version
matrix (tests/scenarios/test_versions.py) hold dgm to it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafka.admin import KafkaAdminClient

from lab.ledger import read_ledger
from lab.txn_copier.run import CopierLabReport
from spark_jobs.audit.aborted_batches import BatchHeader, MarkerWalker, batch_headers
from tests.support.truth import read_records


@dataclass(frozen=True)
class Truth:
    """What happened, from the lab's ledger and an independent read of both topics."""

    expected: frozenset[str]  # ids the source holds committed
    aborted_only: frozenset[str]  # ids the source holds only in aborted transactions
    sink_copies: Counter[str]  # committed sink id -> copies
    sink_aborted: int  # records in the sink's log that read_committed does not return
    ledger_agrees: bool  # the lab producer's ledger: acked = expected, aborted = aborted_only

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for i, n in self.sink_copies.items() if i in self.expected)

    @property
    def lost(self) -> frozenset[str]:
        return self.expected - set(self.sink_copies)

    @property
    def aborted_reads(self) -> int:
        return sum(n for i, n in self.sink_copies.items() if i in self.aborted_only)


@dataclass(frozen=True)
class Sessions:
    """The copier's producer sessions as the sink's record batches carry them."""

    # producer id -> epochs of its data batches, and of its transaction markers
    data: dict[int, set[int]]
    markers: dict[int, set[int]]
    # marker epoch - the epoch of the data it ended, per commit marker
    commit_steps: Counter[int]

    @property
    def protocol(self) -> int:
        """2 when every commit marker carries its data's epoch + 1 (KIP-890), 1 when every one
        carries the data's own epoch; 0 for a mix."""
        steps = set(self.commit_steps)
        return {frozenset({1}): 2, frozenset({0}): 1}.get(frozenset(steps), 0)

    def told(self) -> str:
        return "; ".join(
            f"producer id {pid}: data epochs {spans(self.data[pid])}, marker epochs "
            f"{spans(self.markers.get(pid, set()))}"
            for pid in sorted(self.data)
        )


def spans(numbers: set[int]) -> str:
    """`{0, 1, 2, 5}` as '0-2, 5'."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans) or "none"


def transaction_version(bootstrap: str) -> int | None:
    """The cluster's finalized `transaction.version` feature level; None when it has none."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        features = admin.describe_features()
    finally:
        admin.close()
    finalized = features.get("transaction.version", {}).get("finalized")
    return None if finalized is None else int(finalized[1])


def truth_of(bootstrap: str, report: CopierLabReport) -> Truth:
    committed = read_records(bootstrap, report.source_topic)
    everything = read_records(bootstrap, report.source_topic, "read_uncommitted")
    sink = read_records(bootstrap, report.sink_topic)
    sink_log = read_records(bootstrap, report.sink_topic, "read_uncommitted")
    expected = frozenset(r.header_id for r in committed)
    aborted_only = frozenset(r.header_id for r in everything) - expected
    ledger = read_ledger(Path(report.ledger_path))
    return Truth(
        expected=expected,
        aborted_only=aborted_only,
        sink_copies=Counter(r.header_id for r in sink),
        sink_aborted=len(sink_log) - len(sink),
        ledger_agrees=set(ledger.acked) == expected and ledger.aborted_ids == aborted_only,
    )


def sessions_of(bootstrap: str, topic: str, partitions: int) -> Sessions:
    """Every record batch of `topic`, read with the audit's own walker."""
    walker = MarkerWalker({"bootstrap.servers": bootstrap})
    data: dict[int, set[int]] = {}
    markers: dict[int, set[int]] = {}
    steps: Counter[int] = Counter()
    try:
        for partition in range(partitions):
            open_epoch: dict[int, int] = {}  # producer id -> epoch of its open transaction
            for batch in _batches(walker, topic, partition):
                if batch.marker is None:
                    data.setdefault(batch.producer_id, set()).add(batch.producer_epoch)
                    open_epoch[batch.producer_id] = batch.producer_epoch
                    continue
                markers.setdefault(batch.producer_id, set()).add(batch.producer_epoch)
                started = open_epoch.pop(batch.producer_id, None)
                if batch.marker == 1 and started is not None:
                    steps[batch.producer_epoch - started] += 1
    finally:
        walker.close()
    return Sessions(data, markers, steps)


def _batches(walker: MarkerWalker, topic: str, partition: int) -> Iterator[BatchHeader]:
    position = 0
    while True:
        records, high_watermark = walker.fetch(topic, partition, position)
        if position >= high_watermark:
            return
        for batch in batch_headers(records):
            yield batch
            position = batch.last_offset + 1
