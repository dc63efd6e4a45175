"""Torn commits (docs/design.md, "torn commit") on fingerprints built to hold them: Kafka 4.1's
transactions V2 closes the known trigger, so the lab cannot make one and none is faked there.

A transactional processor's output aborted while its group's committed offset moved past the
source records: the engine names those losses 'torn commit' with the aborted copy as
evidence, and agrees with the DuckDB reference's own reading; the same sink under a deadline
claim, and records the claim does not cover, are no torn commits."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pyarrow as pa

from dgm.contracts.vocabulary import LossCause
from tests.support import engine_run, reference
from tests.support.fingerprint_rows import ARROW_FINGERPRINT, COMMITTED, T0, fingerprint_row
from tests.support.lost_comparison import assert_same

TORN = LossCause.TORN_COMMIT.value


def fingerprints() -> pa.Table:
    # Source s/0: ids a..g at offsets 0..6. The sink k/0 holds a and b committed; d only
    # aborted, twice (a transaction aborted, then its retry aborted too); e aborted, then
    # committed (a retried transaction that made it); f nothing; g aborted, but the group's
    # commit (6) does not cover its source record.
    source = [fingerprint_row("s", 0, n, n, message_id) for n, message_id in enumerate("abcdefg")]
    sink = [
        ("a", True), ("b", True), ("d", False), ("e", False), ("d", False), ("e", True),
        ("g", False), ("c", True),
    ]  # fmt: skip
    rows = source + [
        fingerprint_row("k", 0, n, 10 + n, message_id, src=(0, "abcdefg".index(message_id)),
                        committed=committed)
        for n, (message_id, committed) in enumerate(sink)
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=ARROW_FINGERPRINT)


def test_lost_ids_the_sink_holds_only_aborted_are_torn_commits(spark: Any) -> None:
    table = fingerprints()
    committed = pa.Table.from_pylist(
        [{"topic": "s", "partition": 0, "committed_offset": 6}], schema=COMMITTED
    )
    cutoff = T0 + timedelta(seconds=60)
    ours = engine_run.run(spark, table, committed={("s", 0): 6}, now=cutoff)
    theirs = reference.lost(
        engine_run.of_topics(table, "s"), engine_run.of_topics(table, "k"), committed, cutoff
    )
    assert_same(ours.lost, theirs)
    causes = {r["message_id"]: (r["cause"], r["aborted_copy"]) for r in ours.lost}
    assert causes == {"d": (TORN, "k/0/2"), "f": (LossCause.NOT_IN_SINK.value, None)}
    assert (ours.total("lost"), ours.total("torn_commits")) == (2, 1)


def test_a_deadline_claim_names_no_torn_commit(spark: Any) -> None:
    # The same records under a deadline: the processor's position is unknown, so d's aborted
    # copies say nothing about its commits.
    deadline = replace(
        engine_run.pipeline("p"), consumer_group="", claim="deadline", max_delay="5s"
    )
    config = engine_run.config(pipelines=(deadline,))
    ours = engine_run.run(spark, fingerprints(), config, now=T0 + timedelta(seconds=60))
    causes = {r["message_id"]: r["cause"] for r in ours.lost}
    assert causes == dict.fromkeys("dfg", LossCause.NOT_IN_SINK_WITHIN_MAX_DELAY.value)
    assert ours.total("torn_commits") == 0 and not any(r["aborted_copy"] for r in ours.lost)
