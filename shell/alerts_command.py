"""`dgm alerts list` and `dgm alerts test RULE`: the rules in effect, and a dry run of one."""

from __future__ import annotations

import argparse
import difflib
from datetime import UTC, datetime
from typing import Any

from alerts.evaluate import evaluate
from alerts.metrics import read_values
from dgm.alerting.metrics import BY_NAME
from dgm.alerting.rules import AlertState, holds, scope_kind
from dgm.alerting.store import AlertStore, config_file, rules_in_effect
from dgm.config.alerts import AlertRule
from dgm.config.loader import load_config
from dgm.util.errors import UserFacingError


def register(commands: Any) -> None:
    alerts = commands.add_parser(
        "alerts",
        help="list alert rules and their state, or dry-run one against the published analysis",
        description="Alert rules come from [[alerts]] in dgm.toml and from the dashboard's "
        "Alerts page; they are evaluated after every analysis run.",
    )
    actions = alerts.add_subparsers(dest="alerts_action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="the rules in effect with their current state",
        description="Every rule in effect (dgm.toml's, then the page's), with the subjects "
        "that are pending or firing as of the last evaluation.",
    )
    listing.set_defaults(handler=_list)
    test = actions.add_parser(
        "test",
        help="evaluate one rule now, without notifying or changing any state",
        description="Read the rule's metric from the published analysis, print the value per "
        "subject and what the next evaluation would do (fire, resolve, stay pending).",
    )
    test.add_argument("rule", help="rule name")
    test.set_defaults(handler=_test)


def _condition(rule: AlertRule) -> str:
    text = f"{rule.metric} {rule.comparison} {rule.threshold:g}"
    metric = BY_NAME.get(rule.metric)
    if metric is not None and metric.windowed:
        text += f" ({rule.window})"
    return text + (f" for {rule.for_s:g}s" if rule.for_s else "")


def _list(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    store = AlertStore(config.state_dir)
    rules, errors = rules_in_effect(config, store)
    if errors:
        raise UserFacingError("\n".join(errors))
    if not rules:
        print(f"no alert rules: add [[alerts]] to {config_file(config)} or use the Alerts page")
        return 0
    states = store.states()
    from_file = {rule.name for rule in config.alerts}
    for rule in rules:
        source = "dgm.toml" if rule.name in from_file else "page"
        print(f"{rule.name} [{rule.severity}, {source}]: {_condition(rule)}, scope {rule.scope}")
        mine = sorted(
            (state for (name, _), state in states.items() if name == rule.name),
            key=lambda state: (state.status, state.subject),
        )
        for state in mine:
            print(f"  {state.status}: {state.subject} = {_value(state.value)} since {state.since}")
        if not mine:
            print("  ok")
    return 0


def _value(value: float | None) -> str:
    return "no value" if value is None else f"{value:g}"


def _test(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    store = AlertStore(config.state_dir)
    rules, _ = rules_in_effect(config, store)
    by_name = {rule.name: rule for rule in rules}
    rule = by_name.get(args.rule)
    if rule is None:
        close = difflib.get_close_matches(args.rule, by_name, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "see `dgm alerts list`"
        raise UserFacingError(f"no alert rule named {args.rule!r} ({hint})")
    now = datetime.now(UTC)
    values = read_values(config.state_dir, [rule], now)[rule.name]
    if isinstance(values, str):
        raise UserFacingError(values)
    states = {key: state for key, state in store.states().items() if key[0] == rule.name}
    evaluation = evaluate([rule], {rule.name: values}, states, now)
    notified = {n.subject: n for n in evaluation.notifications}
    print(f"{rule.name}: {_condition(rule)}, {scope_kind(rule)} scope {rule.scope}")
    subjects = sorted(set(values) | {subject for _, subject in states})
    if not subjects:
        print("  no subject in scope has a value in the published analysis")
    for subject in subjects:
        value = values.get(subject)
        before = _status(states.get((rule.name, subject)))
        after = _status(evaluation.states.get((rule.name, subject)))
        note = notified.get(subject)
        action = f"would notify: {note.state}" if note else "would not notify"
        verdict = "holds" if holds(rule, value) else "does not hold"
        print(f"  {subject} = {_value(value)}: {verdict}; {before} -> {after}; {action}")
    return 0


def _status(state: AlertState | None) -> str:
    return "ok" if state is None else state.status
