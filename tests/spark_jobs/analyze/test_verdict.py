"""The verdict rules: achieved semantic, meets_declared and evidence, in Python and as Spark
expressions (the same rules, so both must agree on every combination)."""

from __future__ import annotations

import pytest

from dgm.config.pipelines import SEMANTICS
from dgm.contracts.vocabulary import Achieved, Evidence
from spark_jobs.analyze.verdict import achieved, evidence, meets_declared


@pytest.mark.parametrize(
    ("checked", "dups", "lost", "aborted", "expected"),
    [
        (99, 0, 0, 0, Achieved.INSUFFICIENT_EVIDENCE),  # below min_records, whatever else
        (0, 5, 5, 5, Achieved.INSUFFICIENT_EVIDENCE),
        (100, 0, 0, 0, Achieved.EXACTLY_ONCE),
        (100, 3, 0, 0, Achieved.AT_LEAST_ONCE),
        (100, 0, 2, 0, Achieved.AT_MOST_ONCE),
        (100, 3, 2, 0, Achieved.NO_GUARANTEE),  # both duplicates and losses
        (100, 0, 0, 1, Achieved.NO_GUARANTEE),  # an aborted read alone
        (100, 3, 0, 1, Achieved.NO_GUARANTEE),
    ],
)
def test_achieved(checked: int, dups: int, lost: int, aborted: int, expected: str) -> None:
    assert achieved(checked, dups, lost, aborted, min_records=100) == expected


def test_meets_declared_orders_only_what_is_ordered() -> None:
    table = {(a, d): meets_declared(a, d) for a in Achieved for d in SEMANTICS}
    assert all(table[Achieved.EXACTLY_ONCE, d] for d in SEMANTICS)
    assert (
        table[Achieved.AT_LEAST_ONCE, Achieved.AT_LEAST_ONCE]
        and table[Achieved.AT_MOST_ONCE, Achieved.AT_MOST_ONCE]
    )
    # at-least-once and at-most-once are not ordered against each other.
    assert (
        not table[Achieved.AT_LEAST_ONCE, Achieved.AT_MOST_ONCE]
        and not table[Achieved.AT_MOST_ONCE, Achieved.AT_LEAST_ONCE]
    )
    assert (
        not table[Achieved.AT_LEAST_ONCE, Achieved.EXACTLY_ONCE]
        and not table[Achieved.AT_MOST_ONCE, Achieved.EXACTLY_ONCE]
    )
    assert not any(table[Achieved.NO_GUARANTEE, d] for d in SEMANTICS)
    assert all(table[Achieved.INSUFFICIENT_EVIDENCE, d] is None for d in SEMANTICS)


def test_evidence() -> None:
    assert evidence(0, 3) is Evidence.NONE
    assert evidence(10, 0) is Evidence.UNTESTED
    assert evidence(10, 1) is Evidence.TESTED
