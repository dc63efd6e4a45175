"""The Alerts page's rule form, derived from the rule itself (dgm's AlertRule): one field per
field of the dataclass, in its order; a fresh form holds the rule's defaults; a pick list
wherever the rule allows only some words. A new field of the rule appears in the form
without being restated here: only how a field reads (its label, help, step) is said here, and
a field without words is labelled from its name.

Also what a submitted form becomes ([[alerts]] keys for `validate_rule`), its problems as
text, and dgm.toml when it lets the page edit rules.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dashboard import queries
from dgm.alerting.metrics import ALERT_METRICS, METRICS
from dgm.config.alerts import ALERT_COMPARISONS, ALERT_SEVERITIES, ALERT_WINDOWS, AlertRule
from dgm.config.document import DgmConfig
from dgm.config.problems import ConfigError, Problem

if typing.TYPE_CHECKING:  # typeshed's protocol of a dataclass type
    from _typeshed import DataclassInstance

# The words a field allows where the rule types it `str` (AlertRule.problems checks it against
# the same constants); a field typed with a Literal brings its own.
_CHOICES: dict[str, tuple[str, ...]] = {
    "metric": tuple(ALERT_METRICS),
    "comparison": ALERT_COMPARISONS,
    "window": ALERT_WINDOWS,
    "severity": ALERT_SEVERITIES,
}
METRIC_HELP = {metric.name: metric.help for metric in METRICS}


def metric_label(metric: str) -> str:
    """`duplicate_rate — per pipeline or topic`, for the metric picker."""
    return f"{metric} — per {' or '.join(ALERT_METRICS.get(metric, ('?',)))}"


@dataclass(frozen=True)
class Words:
    """How a field reads in the form, beyond what its name and type say."""

    label: str | None = None  # None: from the name ('for_s' -> 'For (s)')
    help: str | None = None
    placeholder: str | None = None
    step: float | None = None  # a number's +/- step
    describe: Callable[[str], str] | None = None  # a choice as the picker shows it


_WORDS: dict[str, Words] = {
    "name": Words(placeholder="sink-duplicates"),
    "metric": Words(describe=metric_label),
    "scope": Words(
        help="fnmatch pattern over pipeline, topic or group names, e.g. `orders-*` or "
        "`topic:payments-*`"
    ),
    "threshold": Words(
        placeholder="0.001",
        help="A number; rates are fractions (0.001 = 0.1%), seconds for *_s metrics. "
        + "; ".join(f"{m}: {h}" for m, h in METRIC_HELP.items()),
    ),
    "window": Words(help="cumulative: totals over the retention; latest: the newest window"),
    "for_s": Words(help="How long the condition must hold before the rule fires", step=60.0),
    "renotify_s": Words(
        label="Renotify every (s)",
        help="Repeat the notification while the rule keeps firing; 0 = never",
        step=300.0,
    ),
}


@dataclass(frozen=True)
class RuleField:
    """One field of the form: a pick list (`choices`), a number input (`number`) or text."""

    name: str  # the [[alerts]] key
    label: str
    default: object  # what a fresh form holds
    required: bool  # the rule has no default for it
    choices: tuple[str, ...] = ()
    number: bool = False
    minimum: float | None = None
    words: Words = Words()

    @property
    def key(self) -> str:
        """The widget's key in the session state."""
        return f"alert-{self.name}"

    @property
    def text(self) -> bool:
        return not self.choices and not self.number


def _label(name: str) -> str:
    """'severity' -> 'Severity', 'for_s' -> 'For (s)': a `_s` field is in seconds."""
    words, seconds = name.removesuffix("_s"), name.endswith("_s")
    return words.replace("_", " ").capitalize() + (" (s)" if seconds else "")


def _field(field: dataclasses.Field[object], hint: object) -> RuleField:
    literal = typing.get_origin(hint) is typing.Literal
    choices = tuple(map(str, typing.get_args(hint))) if literal else _CHOICES.get(field.name, ())
    required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    if field.default is not dataclasses.MISSING:
        default: object = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:  # a required field: a fresh form offers the first choice, or is empty
        default = choices[0] if choices else ""
    words = _WORDS.get(field.name, Words())
    # A number with a default is a number input; a required one is typed as text, so an empty
    # one is reported by name instead of silently being 0.
    number = hint in (float, int) and not required and not choices
    return RuleField(
        name=field.name,
        label=words.label or _label(field.name),
        default=default,
        required=required,
        choices=choices,
        number=number,
        minimum=0.0 if number and field.name.endswith("_s") else None,  # seconds are >= 0
        words=words,
    )


def fields_of(rule: type[DataclassInstance]) -> tuple[RuleField, ...]:
    """The form's fields for a rule dataclass (AlertRule; a test's made-up one)."""
    hints = typing.get_type_hints(rule)
    return tuple(_field(f, hints[f.name]) for f in dataclasses.fields(rule))


# The form's fields, in the order they are shown and validated.
FIELDS = fields_of(AlertRule)
# A fresh form's values.
DEFAULTS: dict[str, object] = {field.name: field.default for field in FIELDS}


def form_values(raw: Mapping[str, object]) -> dict[str, object]:
    """The [[alerts]] keys the form's widgets hold: text stripped, a text field left empty is
    the rule's default (an empty scope is '*'); numbers are left as typed for `validate_rule`,
    so a bad one is reported naming its field."""
    values: dict[str, object] = {}
    for field in FIELDS:
        value = raw.get(field.name)
        value = value.strip() if isinstance(value, str) else value
        if field.text and not field.required and value in ("", None):
            value = field.default
        values[field.name] = value
    return values


def problem_lines(problems: Sequence[Problem]) -> str:
    """One markdown bullet per problem, the field first: `- **threshold**: ...`."""
    return "\n".join(f"- **{key}**: {message}" for key, message in problems)


def config_for_edits() -> DgmConfig:
    """dgm.toml, when it lets the page add and delete rules; ConfigError when edits are off
    (the form and the Delete buttons are not shown then: a page rendered before they were)."""
    config = queries.config()
    if not config.dashboard.allow_edits:
        raise ConfigError("edits are off ([dashboard] allow_edits = false)")
    return config
