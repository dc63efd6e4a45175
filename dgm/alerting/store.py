"""`<state_dir>/alerts.sqlite`: page rules, alert states, history, the webhook outbox, and what
a local webhook receiver got (`dgm demo` runs one, alerts/receiver.py).

SQLite in WAL mode, so the dashboard reads (and adds rules) while an evaluation writes; it is
apart from dgm.duckdb, which the dashboard only ever reads. Every call opens and closes its own
connection: an instance is cheap and safe to share between threads. Times are stored as UTC
ISO-8601 text.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dgm.alerting.rules import (
    AlertState,
    Evaluation,
    Notification,
    StateKey,
    merge_rules,
    rule_to_dict,
    validate_rule,
)
from dgm.config.alerts import AlertRule
from dgm.config.document import DgmConfig
from dgm.config.problems import Problem

STORE_FILE = "alerts.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS rules (          -- rules added on the dashboard's Alerts page
    name TEXT PRIMARY KEY,
    definition TEXT NOT NULL,               -- JSON of the [[alerts]] keys
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS states (         -- pending and firing (rule, subject); absent = ok
    rule TEXT NOT NULL, subject TEXT NOT NULL, status TEXT NOT NULL, since TEXT NOT NULL,
    value REAL, fired_at TEXT, notified_at TEXT,
    PRIMARY KEY (rule, subject)
);
CREATE TABLE IF NOT EXISTS history (        -- every firing and resolution
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, rule TEXT NOT NULL, subject TEXT NOT NULL,
    state TEXT NOT NULL, metric TEXT NOT NULL, scope TEXT NOT NULL, severity TEXT NOT NULL,
    value REAL, comparison TEXT NOT NULL, threshold REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS notifications (  -- webhook outbox, delivered in id order
    id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, rule TEXT NOT NULL,
    subject TEXT NOT NULL, state TEXT NOT NULL,
    payload TEXT NOT NULL,                  -- the JSON body
    status TEXT NOT NULL,                   -- pending | delivered | failed (given up)
    attempts INTEGER NOT NULL DEFAULT 0, error TEXT, last_attempt_at TEXT,
    next_attempt_at TEXT NOT NULL, delivered_at TEXT
);
CREATE INDEX IF NOT EXISTS notifications_pending ON notifications (status, id);
CREATE TABLE IF NOT EXISTS received (       -- bodies a local webhook receiver got
    id INTEGER PRIMARY KEY, at TEXT NOT NULL,
    body TEXT NOT NULL                      -- the JSON as received
);
"""


@dataclass(frozen=True)
class HistoryEntry:
    id: int
    at: datetime
    rule: str
    subject: str
    state: str  # firing | resolved
    metric: str
    scope: str
    severity: str
    value: float | None
    comparison: str
    threshold: float


@dataclass(frozen=True)
class Delivery:
    """One webhook notification and how its delivery went."""

    id: int
    created_at: datetime
    rule: str
    subject: str
    state: str  # firing | resolved
    payload: dict[str, Any]
    status: str  # pending | delivered | failed
    attempts: int
    error: str | None
    last_attempt_at: datetime | None
    next_attempt_at: datetime
    delivered_at: datetime | None


@dataclass(frozen=True)
class Received:
    """One POST a local webhook receiver got: when, and its JSON body."""

    id: int
    at: datetime
    body: Any


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _required_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


class AlertStore:
    """The alerts database of one state directory (created on first use)."""

    def __init__(self, state_dir: Path, timeout_s: float = 10.0) -> None:
        self.path = state_dir / STORE_FILE
        self._timeout_s = timeout_s

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection in one transaction: committed on success, rolled back on error."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(self.path, timeout=self._timeout_s)) as db:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            with db:
                yield db

    # --- rules added on the dashboard page ---------------------------------------------

    def add_rule(
        self,
        values: Mapping[str, object],
        file_rules: Sequence[AlertRule] = (),
        *,
        replace: bool = False,
        now: datetime | None = None,
    ) -> AlertRule | list[Problem]:
        """Validate and store a page rule; its problems instead when invalid or its name is
        taken (by a dgm.toml rule in `file_rules`, or by a page rule unless `replace`)."""
        rule = validate_rule(values)
        if isinstance(rule, list):
            return rule
        if any(existing.name == rule.name for existing in file_rules):
            return [("name", f"rule {rule.name!r}: dgm.toml already declares a rule of this name")]
        created = _text(now or datetime.now(UTC))
        with self._db() as db:
            taken = db.execute("SELECT 1 FROM rules WHERE name = ?", (rule.name,)).fetchone()
            if taken and not replace:
                return [("name", f"rule {rule.name!r}: a page rule of this name exists")]
            db.execute(
                "INSERT OR REPLACE INTO rules (name, definition, created_at) VALUES (?, ?, ?)",
                (rule.name, json.dumps(rule_to_dict(rule)), created),
            )
        return rule

    def delete_rule(self, name: str) -> bool:
        """Remove a page rule; False if there was none of that name."""
        with self._db() as db:
            return db.execute("DELETE FROM rules WHERE name = ?", (name,)).rowcount > 0

    def page_rules(self) -> tuple[list[AlertRule], list[str]]:
        """The page rules, and an error for each stored one that no longer validates."""
        with self._db() as db:
            rows = db.execute("SELECT name, definition FROM rules ORDER BY created_at, name")
            stored = [(row["name"], row["definition"]) for row in rows]
        rules: list[AlertRule] = []
        errors: list[str] = []
        for name, definition in stored:
            rule = validate_rule(json.loads(definition))
            if isinstance(rule, AlertRule):
                rules.append(rule)
            else:
                reasons = "; ".join(f"{key}: {message}" for key, message in rule)
                errors.append(f"page rule {name!r} is ignored: {reasons}")
        return rules, errors

    # --- states, history, outbox ----------------------------------------------------------

    def states(self) -> dict[StateKey, AlertState]:
        with self._db() as db:
            rows = db.execute("SELECT * FROM states").fetchall()
        return {
            (row["rule"], row["subject"]): AlertState(
                rule=row["rule"],
                subject=row["subject"],
                status=row["status"],
                since=_required_time(row["since"]),
                value=row["value"],
                fired_at=_time(row["fired_at"]),
                notified_at=_time(row["notified_at"]),
            )
            for row in rows
        }

    def apply(
        self, evaluation: Evaluation, payloads: Sequence[tuple[Notification, dict[str, Any]]]
    ) -> None:
        """In one transaction: the new states, history for each firing and resolution (not
        for repeats), and `payloads` queued for the webhook, due at once."""
        with self._db() as db:
            db.execute("DELETE FROM states")
            db.executemany(
                "INSERT INTO states VALUES (?, ?, ?, ?, ?, ?, ?)",
                [_state_row(state) for state in evaluation.states.values()],
            )
            db.executemany(
                "INSERT INTO history (at, rule, subject, state, metric, scope, severity, value, "
                "comparison, threshold) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [_history_row(n) for n in evaluation.notifications if not n.repeat],
            )
            db.executemany(
                "INSERT INTO notifications (created_at, rule, subject, state, payload, status, "
                "next_attempt_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)",
                [
                    (_text(n.at), n.rule.name, n.subject, n.state, json.dumps(body), _text(n.at))
                    for n, body in payloads
                ],
            )

    def history(self, limit: int = 100, rule: str | None = None) -> list[HistoryEntry]:
        """The newest firings and resolutions first, of one rule or of all."""
        where, args = ("WHERE rule = ?", (rule, limit)) if rule else ("", (limit,))
        with self._db() as db:
            rows = db.execute(
                f"SELECT * FROM history {where} ORDER BY id DESC LIMIT ?", args
            ).fetchall()
        return [
            HistoryEntry(
                **{**dict(row), "at": _required_time(row["at"])}  # type: ignore[arg-type]
            )
            for row in rows
        ]

    def deliveries(self, limit: int = 100, status: str | None = None) -> list[Delivery]:
        """Webhook notifications, newest first (optionally only pending/delivered/failed)."""
        where, args = ("WHERE status = ?", (status, limit)) if status else ("", (limit,))
        with self._db() as db:
            rows = db.execute(
                f"SELECT * FROM notifications {where} ORDER BY id DESC LIMIT ?", args
            ).fetchall()
        return [_delivery(row) for row in rows]

    def pending_deliveries(self) -> list[Delivery]:
        """Webhook notifications not delivered yet, oldest first (the order to send them in)."""
        with self._db() as db:
            rows = db.execute(
                "SELECT * FROM notifications WHERE status = 'pending' ORDER BY id"
            ).fetchall()
        return [_delivery(row) for row in rows]

    def record_attempts(
        self,
        delivery_id: int,
        *,
        attempts: int,
        at: datetime,
        error: str | None,
        next_attempt_at: datetime | None,
    ) -> None:
        """After `attempts` more tries: delivered (error None), retry at `next_attempt_at`,
        or given up (error set, next_attempt_at None)."""
        status = "delivered" if error is None else "pending" if next_attempt_at else "failed"
        with self._db() as db:
            db.execute(
                "UPDATE notifications SET status = ?, attempts = attempts + ?, error = ?, "
                "last_attempt_at = ?, next_attempt_at = coalesce(?, next_attempt_at), "
                "delivered_at = ? WHERE id = ?",
                (
                    status,
                    attempts,
                    error,
                    _text(at),
                    _text(next_attempt_at),
                    _text(at) if error is None else None,
                    delivery_id,
                ),
            )

    # --- a local receiver's inbox ---------------------------------------------------------

    def receive(self, body: Any, at: datetime | None = None) -> int:
        """Keep one body a local webhook receiver got; its id."""
        with self._db() as db:
            cursor = db.execute(
                "INSERT INTO received (at, body) VALUES (?, ?)",
                (_text(at or datetime.now(UTC)), json.dumps(body)),
            )
        return int(cursor.lastrowid or 0)

    def received(self, limit: int = 100) -> list[Received]:
        """What the local receiver got, newest first."""
        with self._db() as db:
            rows = db.execute("SELECT * FROM received ORDER BY id DESC LIMIT ?", (limit,))
            return [
                Received(row["id"], _required_time(row["at"]), json.loads(row["body"]))
                for row in rows.fetchall()
            ]


def _state_row(s: AlertState) -> tuple[object, ...]:
    since, fired, notified = _text(s.since), _text(s.fired_at), _text(s.notified_at)
    return (s.rule, s.subject, s.status, since, s.value, fired, notified)


def _history_row(n: Notification) -> tuple[object, ...]:
    rule = n.rule
    return (
        *(_text(n.at), rule.name, n.subject, n.state, rule.metric, rule.scope, rule.severity),
        *(n.value, rule.comparison, rule.threshold),
    )


def _delivery(row: sqlite3.Row) -> Delivery:
    return Delivery(
        id=row["id"],
        created_at=_required_time(row["created_at"]),
        rule=row["rule"],
        subject=row["subject"],
        state=row["state"],
        payload=json.loads(row["payload"]),
        status=row["status"],
        attempts=row["attempts"],
        error=row["error"],
        last_attempt_at=_time(row["last_attempt_at"]),
        next_attempt_at=_required_time(row["next_attempt_at"]),
        delivered_at=_time(row["delivered_at"]),
    )


def config_file(config: DgmConfig) -> str:
    return str(config.source) if config.source is not None else "dgm.toml"


def rules_in_effect(
    config: DgmConfig, store: AlertStore | None = None
) -> tuple[tuple[AlertRule, ...], list[str]]:
    """dgm.toml's [[alerts]] then the page's rules, and the errors (name clashes naming both,
    stored page rules that no longer validate); a clashing page rule is left out."""
    store = store or AlertStore(config.state_dir)
    page_rules, errors = store.page_rules()
    rules, clashes = merge_rules(config.alerts, page_rules, config_file(config))
    return rules, errors + clashes
