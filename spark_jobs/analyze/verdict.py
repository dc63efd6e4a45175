"""The verdict of a pipeline from its counts, by docs/design.md: achieved semantic, whether it meets
the declared one, and how strong the evidence is.

Each rule is written once and evaluated by `achieved()` on a row of counts: the engine sums
counts per pipeline and window, so verdicts are worked out on the driver (pipeline_metrics).
Upstream duplicates are not passed in: they are reported, never counted against a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
AT_MOST_ONCE = "at-most-once"
NO_GUARANTEE = "no guarantee"
INSUFFICIENT_EVIDENCE = "insufficient evidence"
ACHIEVED = (EXACTLY_ONCE, AT_LEAST_ONCE, AT_MOST_ONCE, NO_GUARANTEE, INSUFFICIENT_EVIDENCE)

TESTED, UNTESTED, NONE = "tested", "untested", "none"

# (records_checked, duplicate_copies, lost, aborted_reads) -> condition.
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
