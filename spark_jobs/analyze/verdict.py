"""The verdict of a pipeline from its counts, by docs/design.md: achieved semantic, whether it meets
the declared one, and how strong the evidence is.

Each rule is written once and evaluated by `achieved()` on a row of counts: the engine sums
counts per pipeline and window, so verdicts are worked out on the driver (pipeline_metrics).
Upstream duplicates are not passed in: they are reported, never counted against a pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from dgm.contracts.vocabulary import MEETS, Achieved, Evidence

# (records_checked, duplicate_copies, lost, aborted_reads) -> condition.
Rule = Callable[[Any, Any, Any, Any], Any]


# (achieved, condition over (records_checked, duplicate_copies, lost, aborted_reads)), the
# first that holds names the verdict; `min_records` is bound by `_rules`.
def _rules(min_records: int) -> tuple[tuple[Achieved, Rule], ...]:
    return (
        (
            Achieved.INSUFFICIENT_EVIDENCE,
            lambda checked, dups, lost, aborted: checked < min_records,
        ),
        (
            Achieved.NO_GUARANTEE,
            lambda checked, dups, lost, aborted: (aborted > 0) | ((dups > 0) & (lost > 0)),
        ),
        (Achieved.AT_MOST_ONCE, lambda checked, dups, lost, aborted: lost > 0),
        (Achieved.AT_LEAST_ONCE, lambda checked, dups, lost, aborted: dups > 0),
        (Achieved.EXACTLY_ONCE, lambda checked, dups, lost, aborted: checked >= 0),
    )


def achieved(
    records_checked: int, duplicate_copies: int, lost: int, aborted_reads: int, min_records: int
) -> Achieved:
    """The achieved semantic for these counts (duplicates without upstream ones)."""
    counts = (records_checked, duplicate_copies, lost, aborted_reads)
    return next(name for name, rule in _rules(min_records) if bool(rule(*counts)))


def meets_declared(achieved: Achieved, declared: str) -> bool | None:
    """Whether `achieved` is at least as strong as `declared` (dgm.contracts.vocabulary.MEETS); None
    without enough evidence."""
    if not achieved.judged:
        return None
    return declared in MEETS[achieved]


def evidence(records_checked: int, faults_observed: int) -> Evidence:
    """tested: faults were seen while the checked records flowed; untested: none was; none:
    nothing was checked."""
    if records_checked <= 0:
        return Evidence.NONE
    return Evidence.TESTED if faults_observed > 0 else Evidence.UNTESTED


def compose(stages: Iterable[Achieved]) -> Achieved:
    """The semantic of stages run one after the other (docs/design.md, "Stages and the
    end-to-end semantic"): a loss anywhere and a duplicate anywhere make no guarantee; a
    stage without evidence leaves the whole unjudged unless that already holds; otherwise the
    weakest of at-most-once and at-least-once; exactly-once only when every stage is."""
    seen = set(stages)
    if Achieved.NO_GUARANTEE in seen or {Achieved.AT_MOST_ONCE, Achieved.AT_LEAST_ONCE} <= seen:
        return Achieved.NO_GUARANTEE
    if not seen or Achieved.INSUFFICIENT_EVIDENCE in seen:
        return Achieved.INSUFFICIENT_EVIDENCE
    for weaker in (Achieved.AT_MOST_ONCE, Achieved.AT_LEAST_ONCE):
        if weaker in seen:
            return weaker
    return Achieved.EXACTLY_ONCE
