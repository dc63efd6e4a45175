"""The audit's JDBC step against a real PostgreSQL server: each cycle stores only the rows
added, its position commits with them (a writer killed before the commit loses and repeats
nothing), merges keep it, and a changed sink is read again from its start."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dgm.config.document import DgmConfig
from spark_jobs.audit.jdbc_audit import audit_jdbc, positions
from spark_jobs.audit.rewrite import replace_batches
from spark_jobs.audit.store import FingerprintStore
from tests.support.jdbc_sink import insert, make_table, pipeline
from tests.support.postgres import PostgresUnderTest

pytestmark = pytest.mark.slow


def stored(spark: Any, state_dir: Path) -> Counter[tuple[str, int]]:
    """(message id, offset) -> copies among the fingerprints the store holds."""
    rows = FingerprintStore(state_dir).load(spark).collect()
    return Counter((r["message_id"], r["offset"]) for r in rows)


def run(spark: Any, config: DgmConfig) -> dict[str, int]:
    records: dict[str, int] = {}
    with FingerprintStore(config.state_dir).writer_lock():
        audit_jdbc(spark, config, records, lambda line: None)
    return records


def test_cycles_store_added_rows_once_and_the_position_commits_with_them(
    spark: Any, postgres: PostgresUnderTest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = make_table(postgres)
    config = DgmConfig(state_dir=tmp_path, pipelines=(pipeline(postgres, table),))
    topic = config.pipelines[0].sink_names()[-1]
    insert(postgres, table, ["a", "b", "c"])
    assert run(spark, config) == {topic: 3}
    assert run(spark, config) == {}  # nothing added: no batch
    insert(postgres, table, ["d", "e"])

    # A writer killed after writing the batch, before its rename (the commit).
    def killed(source: Any, target: Any) -> None:
        raise KeyboardInterrupt("killed before the commit")

    monkeypatch.setattr("spark_jobs.audit.store.os.rename", killed)
    with pytest.raises(KeyboardInterrupt):
        run(spark, config)
    monkeypatch.undo()
    store = FingerprintStore(tmp_path)
    assert positions(store.complete_batches(), config) == {"orders-pg": 3}
    assert run(spark, config) == {topic: 2}  # the leftover is removed, the rows read once
    expected = Counter({(i, n): 1 for n, i in enumerate("abcde", start=1)})
    assert stored(spark, tmp_path) == expected
    assert positions(store.complete_batches(), config) == {"orders-pg": 5}

    # A merge keeps the rows and the position.
    with store.writer_lock():
        replace_batches(store, spark, store.complete_batches())
    assert len(store.complete_batches()) == 1
    assert positions(store.complete_batches(), config) == {"orders-pg": 5}
    insert(postgres, table, ["f"])
    assert run(spark, config) == {topic: 1}
    assert stored(spark, tmp_path) == expected + Counter({("f", 6): 1})

    # Another table: the old rows go, the new table is read from its start.
    other = make_table(postgres)
    insert(postgres, other, ["x", "y"])
    moved = replace(config, pipelines=(pipeline(postgres, other),))
    assert run(spark, moved) == {moved.pipelines[0].sink_names()[-1]: 2}
    assert stored(spark, tmp_path) == Counter({("x", 1): 1, ("y", 2): 1})
    assert positions(store.complete_batches(), moved) == {"orders-pg": 2}
    # No JDBC sink any more: its rows go too.
    run(spark, replace(config, pipelines=()))
    assert stored(spark, tmp_path) == Counter()
    assert positions(store.complete_batches(), moved) == {}
