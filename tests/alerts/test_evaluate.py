"""The alert state machine: pending until for_s, firing once, renotify, resolve."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from alerts.evaluate import evaluate
from dgm.alerting.rules import AlertState, Evaluation, StateKey
from dgm.config.alerts import AlertRule

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RULE = AlertRule(name="lag", metric="lso_lag", threshold=100, for_s=60)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run(
    rule: AlertRule, steps: list[tuple[float, dict[str, float]]]
) -> list[tuple[float, list[tuple[str, str, bool]], dict[StateKey, AlertState]]]:
    """`rule` evaluated at each (seconds, values): (t, [(subject, state, repeat)], states)."""
    states: dict[StateKey, AlertState] = {}
    out: list[tuple[float, list[tuple[str, str, bool]], dict[StateKey, AlertState]]] = []
    for seconds, values in steps:
        result: Evaluation = evaluate([rule], {rule.name: values}, states, at(seconds))
        states = result.states
        said: list[tuple[str, str, bool]] = [
            (n.subject, n.state, n.repeat) for n in result.notifications
        ]
        out.append((seconds, said, states))
    return out


def test_pending_until_for_s_then_firing_once_then_resolved() -> None:
    steps = run(
        RULE,
        [
            (0, {"orders": 150, "payments": 5}),
            (30, {"orders": 200, "payments": 5}),
            (60, {"orders": 120, "payments": 5}),
            (90, {"orders": 130, "payments": 5}),
            (600, {"orders": 130}),
            (660, {"orders": 90}),
            (700, {"orders": 90}),
        ],
    )
    said = [(t, s) for t, s, _ in steps]
    assert said == [
        (0, []),
        (30, []),
        (60, [("orders", "firing", False)]),
        (90, []),
        (600, []),  # no repeat without renotify_s
        (660, [("orders", "resolved", False)]),
        (700, []),
    ]
    first = steps[0][2][("lag", "orders")]
    assert first.status == "pending" and first.since == at(0) and first.value == 150
    firing = steps[2][2][("lag", "orders")]
    assert firing.status == "firing" and firing.fired_at == at(60) and firing.since == at(0)
    assert set(steps[2][2]) == {("lag", "orders")}  # payments never held
    assert steps[5][2] == {}


def test_condition_interrupted_while_pending_starts_over_silently() -> None:
    steps = run(RULE, [(0, {"t": 150}), (50, {"t": 10}), (70, {"t": 150}), (120, {"t": 150})])
    assert [s for _, s, _ in steps] == [[], [], [], []]
    assert steps[-1][2][("lag", "t")].since == at(70)
    assert run(RULE, [(0, {"t": 150}), (130, {"t": 150})])[1][1] == [("t", "firing", False)]


def test_renotify_while_firing() -> None:
    rule = AlertRule(name="lag", metric="lso_lag", threshold=100, renotify_s=300)
    steps = run(rule, [(t, {"t": 500}) for t in (0, 100, 299, 300, 500, 600)])
    assert [(t, s) for t, s, _ in steps if s] == [
        (0, [("t", "firing", False)]),  # for_s = 0: fires at once
        (300, [("t", "firing", True)]),
        (600, [("t", "firing", True)]),
    ]


def test_subject_gone_resolves_and_unreadable_rule_keeps_its_state() -> None:
    rule = AlertRule(name="lag", metric="lso_lag", threshold=100)
    fired = evaluate([rule], {"lag": {"t": 500}}, {}, at(0))
    kept = evaluate([rule], {}, fired.states, at(10))  # values could not be read
    assert kept.states == fired.states and kept.notifications == ()
    gone = evaluate([rule], {"lag": {}}, fired.states, at(20))
    assert [(n.subject, n.state, n.value) for n in gone.notifications] == [("t", "resolved", None)]
    assert evaluate([], {}, fired.states, at(30)).states == {}  # rule deleted: state dropped


def test_raised_threshold_resolves() -> None:
    rule = AlertRule(name="dups", metric="duplicate_rate", threshold=0.01)
    fired = evaluate([rule], {"dups": {"p": 0.05}}, {}, at(0))
    raised = AlertRule(name="dups", metric="duplicate_rate", threshold=0.1)
    resolved = evaluate([raised], {"dups": {"p": 0.05}}, fired.states, at(10))
    assert [(n.state, n.rule.threshold, n.value) for n in resolved.notifications] == [
        ("resolved", 0.1, 0.05)
    ]
