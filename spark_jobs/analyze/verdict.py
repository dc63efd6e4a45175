"""The verdict of a pipeline from its counts, by docs/design.md: achieved semantic, whether it meets
the declared one, and how strong the evidence is.

Each rule is written once, over values that are either plain Python numbers or Spark Columns
(`>`, `<`, `&`, `|` mean the same on both), and then evaluated both ways: `achieved()` for a
row of counts in Python, `achieved_column()` as one Spark expression for windows.
Upstream duplicates are not passed in: they are reported, never counted against a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
AT_MOST_ONCE = "at-most-once"
NO_GUARANTEE = "no guarantee"
INSUFFICIENT_EVIDENCE = "insufficient evidence"
ACHIEVED = (EXACTLY_ONCE, AT_LEAST_ONCE, AT_MOST_ONCE, NO_GUARANTEE, INSUFFICIENT_EVIDENCE)

TESTED, UNTESTED, NONE = "tested", "untested", "none"

# (records_checked, duplicate_copies, lost, aborted_reads) -> condition; each value a Python
# int or a Spark Column, the condition of the same kind.
Rule = Callable[[Any, Any, Any, Any], Any]


# (achieved, condition over (records_checked, duplicate_copies, lost, aborted_reads)), the
# first that holds names the verdict; `min_records` is bound by `_rules`.
def _rules(min_records: int) -> tuple[tuple[str, Rule], ...]:
    return (
        (INSUFFICIENT_EVIDENCE, lambda checked, dups, lost, aborted: checked < min_records),
        (
            NO_GUARANTEE,
            lambda checked, dups, lost, aborted: (aborted > 0) | ((dups > 0) & (lost > 0)),
        ),
        (AT_MOST_ONCE, lambda checked, dups, lost, aborted: lost > 0),
        (AT_LEAST_ONCE, lambda checked, dups, lost, aborted: dups > 0),
        (EXACTLY_ONCE, lambda checked, dups, lost, aborted: checked >= 0),
    )


# achieved -> the declared semantics it meets. at-most-once and at-least-once are not ordered
# against each other: each meets only itself; exactly-once meets all; no guarantee none.
MEETS: dict[str, frozenset[str]] = {
    EXACTLY_ONCE: frozenset({EXACTLY_ONCE, AT_LEAST_ONCE, AT_MOST_ONCE}),
    AT_LEAST_ONCE: frozenset({AT_LEAST_ONCE}),
    AT_MOST_ONCE: frozenset({AT_MOST_ONCE}),
    NO_GUARANTEE: frozenset(),
}


def achieved(
    records_checked: int, duplicate_copies: int, lost: int, aborted_reads: int, min_records: int
) -> str:
    """The achieved semantic for these counts (duplicates without upstream ones)."""
    counts = (records_checked, duplicate_copies, lost, aborted_reads)
    return next(name for name, rule in _rules(min_records) if bool(rule(*counts)))


def meets_declared(achieved: str, declared: str) -> bool | None:
    """Whether `achieved` is at least as strong as `declared`; None without enough evidence."""
    if achieved == INSUFFICIENT_EVIDENCE:
        return None
    return declared in MEETS[achieved]


def evidence(records_checked: int, faults_observed: int) -> str:
    """tested: faults were seen while the checked records flowed; untested: none was; none:
    nothing was checked."""
    if records_checked <= 0:
        return NONE
    return TESTED if faults_observed > 0 else UNTESTED


def achieved_column(
    records_checked: Column,
    duplicate_copies: Column,
    lost: Column,
    aborted_reads: Column,
    min_records: int,
) -> Column:
    """`achieved` as a Spark expression over count columns (nulls count as 0)."""
    counts = [
        F.coalesce(c, F.lit(0)) for c in (records_checked, duplicate_copies, lost, aborted_reads)
    ]
    rules = _rules(min_records)
    result: Column = F.lit(rules[-1][0])
    for name, rule in reversed(rules[:-1]):
        result = F.when(rule(*counts), F.lit(name)).otherwise(result)
    return result


def meets_declared_column(achieved: Column, declared: Column) -> Column:
    """`meets_declared` as a Spark expression; null for insufficient evidence."""
    result: Column = F.lit(False)
    for name, met in MEETS.items():
        meets = declared.isin(*sorted(met)) if met else F.lit(False)
        result = F.when(achieved == F.lit(name), meets).otherwise(result)
    return F.when(achieved != F.lit(INSUFFICIENT_EVIDENCE), result)


def evidence_column(records_checked: Column, faults_observed: Column) -> Column:
    """`evidence` as a Spark expression."""
    records = F.coalesce(records_checked, F.lit(0))
    faults = F.coalesce(faults_observed, F.lit(0))
    return (
        F.when(records <= 0, F.lit(NONE)).when(faults > 0, F.lit(TESTED)).otherwise(F.lit(UNTESTED))
    )
