"""Each processor mode, run by the lab on the real broker through real SIGKILLs, delivers what
its semantic says. The counts are computed here, independently of the lab: the sink topic is
read with a plain read_committed consumer and compared with the producer's ledger.

The runs are the session's lab runs (`lab_runs`, tests/support/published_lab.py: 600 records
at 60/s, three SIGKILLs for each mode but exactly-once-broken), which the verdict tests judge
too (tests/scenarios/test_lab_verdicts.py): one run of each mode for both."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dgm.contracts.headers import SRC
from lab.ledger import read_ledger
from lab.run import LabReport
from tests.support.published_lab import MESSAGES, LabRuns
from tests.support.truth import read_records


@dataclass(frozen=True)
class SinkCounts:
    ids: Counter[str]  # message id -> copies in the sink
    sources: Counter[str]  # dgm-src -> copies

    @property
    def duplicates(self) -> int:
        """Extra copies: a committed record whose id already appeared earlier in the sink."""
        return sum(self.ids.values()) - len(self.ids)

    def lost(self, acked: set[str]) -> set[str]:
        return acked - set(self.ids)


def read_sink(kafka: Any, report: LabReport, isolation: str = "read_committed") -> SinkCounts:
    """Every committed record of the run's sink topic, with a plain read_committed consumer."""
    assert report.sink_topic is not None
    records = read_records(kafka.bootstrap_servers, report.sink_topic, isolation)
    return SinkCounts(
        Counter(r.header_id for r in records), Counter(r.headers[SRC].decode() for r in records)
    )


def lab(lab_runs: LabRuns, mode: str) -> LabReport:
    """The session's run of `mode`."""
    report = lab_runs.reports[mode]
    assert report.caught_up, "the processor never caught up with the source"
    assert report.messages["sent"] == MESSAGES
    return report


def assert_real_kills(report: LabReport, at_least: int) -> None:
    assert len(report.crashes) >= at_least, report.crashes
    for crash in report.crashes:
        assert crash["signal"] == "SIGKILL" and crash["returncode"] == -9, crash
    assert len({crash["pid"] for crash in report.crashes}) == len(report.crashes)


def test_at_most_once_loses_on_crash_and_never_duplicates(kafka: Any, lab_runs: LabRuns) -> None:
    report = lab(lab_runs, "at-most-once")
    assert_real_kills(report, 3)
    assert {c["aim"] for c in report.crashes} == {"between-commit-and-produce"}
    acked = set(read_ledger(Path(report.ledger_path)).acked)
    assert len(acked) == MESSAGES
    sink = read_sink(kafka, report)
    assert sink.lost(acked), "a crash between commit and produce must lose its batch"
    assert sink.duplicates == 0
    assert set(sink.ids) <= acked


def test_at_least_once_duplicates_on_crash_and_never_loses(kafka: Any, lab_runs: LabRuns) -> None:
    report = lab(lab_runs, "at-least-once")
    assert_real_kills(report, 3)
    assert {c["aim"] for c in report.crashes} == {"between-produce-and-commit"}
    acked = set(read_ledger(Path(report.ledger_path)).acked)
    sink = read_sink(kafka, report)
    assert not sink.lost(acked)
    assert sink.duplicates > 0
    # The duplicates are reprocessing: the same source record written to the sink twice.
    assert sum(sink.sources.values()) - len(sink.sources) == sink.duplicates


def test_exactly_once_neither_loses_nor_duplicates(kafka: Any, lab_runs: LabRuns) -> None:
    report = lab(lab_runs, "exactly-once")
    assert_real_kills(report, 3)
    ledger = read_ledger(Path(report.ledger_path))
    assert report.messages["aborted"] > 0 and ledger.aborted_ids
    acked = set(ledger.acked)
    sink = read_sink(kafka, report)
    assert not sink.lost(acked)
    assert sink.duplicates == 0
    assert not set(sink.ids) & ledger.aborted_ids
    # The kills did leave half-done work in the sink: aborted copies only read_committed hides.
    everything = read_sink(kafka, report, "read_uncommitted")
    assert everything.duplicates > 0


def test_exactly_once_broken_leaks_aborted_records(kafka: Any, lab_runs: LabRuns) -> None:
    report = lab(lab_runs, "exactly-once-broken")
    ledger = read_ledger(Path(report.ledger_path))
    sink = read_sink(kafka, report)
    leaked = set(sink.ids) & ledger.aborted_ids
    assert len(leaked) > 0, "read_uncommitted must let aborted source records through"
    assert not sink.lost(set(ledger.acked))


def test_idempotent_sink_stores_every_acked_id_once(kafka: Any, lab_runs: LabRuns) -> None:
    report = lab(lab_runs, "idempotent-sink")
    assert_real_kills(report, 3)
    assert report.sink_topic is None and report.external_sink is not None
    ledger = read_ledger(Path(report.ledger_path))
    acked = set(ledger.acked)
    store = report.external_sink
    db = sqlite3.connect(f"file:{store['path']}?mode=ro", uri=True)
    try:
        columns = ", ".join([store["id_column"], *store["source_columns"][1:]])
        rows = db.execute(f"SELECT {columns} FROM {store['table']}").fetchall()
    finally:
        db.close()
    copies = Counter(row[0] for row in rows)
    assert set(copies) == acked
    assert set(copies.values()) == {1}
    # Each row came from the acknowledged source record of its id.
    assert {row[0]: (row[1], row[2]) for row in rows} == ledger.acked
