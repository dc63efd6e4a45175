"""What a processor process is told: one JSON object on its command line."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from dgm.util.errors import UserFacingError

Mode = Literal[
    "at-most-once",
    "at-least-once",
    "exactly-once",
    "exactly-once-broken",
    "idempotent-sink",
    "postgres-exactly-once",
    "postgres-at-least-once",
]
# The modes whose results go to a PostgreSQL table (sink_dsn, sink_table), not a topic.
POSTGRES_MODES = ("postgres-exactly-once", "postgres-at-least-once")
MODES: tuple[str, ...] = get_args(Mode)


class SettingsError(UserFacingError):
    pass


@dataclass(frozen=True)
class ProcessorSettings:
    bootstrap_servers: str
    source_topic: str
    group_id: str
    # Where results go: a topic for every mode but idempotent-sink, which writes sink_path.
    sink_topic: str = ""
    sink_path: str = ""  # SQLite file (idempotent-sink)
    sink_table: str = "lab_sink"
    # Where a processor that commits no offsets keeps its position (lab.processors.position_file).
    position_path: str = ""
    # libpq connection string of the PostgreSQL database (the postgres-* modes).
    sink_dsn: str = field(default="", repr=False)  # may hold a password
    # Names this instance: the transactional.id suffix and the static group member id. A
    # restarted instance reuses it, which is what fences its zombie.
    instance: str = "main"
    # Static membership (group.instance.id): a restarted instance takes its partitions back at
    # once instead of waiting out the dead member's session. A visitor that joins and leaves
    # (a rebalance) is dynamic, so its clean close hands the partitions back immediately.
    static_member: bool = True
    batch_size: int = 20
    # Simulated processing time after each announced phase: the window an aimed kill hits.
    step_delay: float = 0.15
    # After each announced phase, wait for the supervisor's `go` (lab.processors.announce): set
    # by the supervisor, so its aimed kill lands between the two steps however late it reads.
    paced: bool = False
    session_timeout_ms: int = 10_000
    # Extra librdkafka settings (security etc.) for both consumer and producer.
    client: dict[str, str] = field(default_factory=dict)

    def problems(self) -> list[str]:
        found = []
        for key in ("bootstrap_servers", "source_topic", "group_id", "instance"):
            if not getattr(self, key):
                found.append(f"{key}: expected a non-empty string")
        if self.batch_size < 1:
            found.append(f"batch_size: expected >= 1, got {self.batch_size}")
        if self.step_delay < 0:
            found.append(f"step_delay: expected >= 0, got {self.step_delay}")
        return found

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ProcessorSettings:
        """Parse and check; SettingsError names what is wrong (never echoes client values)."""
        try:
            data: Any = json.loads(text)
        except json.JSONDecodeError as error:
            raise SettingsError(f"--settings-json is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise SettingsError("--settings-json must be a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise SettingsError(f"--settings-json: unknown keys {unknown}")
        for declared in dataclasses.fields(cls):
            if declared.name in data and not _fits(data[declared.name], _TYPES[declared.name]):
                raise SettingsError(
                    f"--settings-json: {declared.name}: expected {_TYPES[declared.name].__name__}"
                )
        try:
            settings = cls(**data)
        except TypeError as error:  # a required key is missing
            raise SettingsError(f"--settings-json: {error}") from None
        problems = settings.problems()
        if problems:
            raise SettingsError("--settings-json: " + "; ".join(problems))
        return settings

    def with_mode_check(self, mode: str) -> ProcessorSettings:
        """Self, if it carries the sink the mode writes to; else SettingsError."""
        if mode not in MODES:
            raise SettingsError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
        if mode == "idempotent-sink" and not self.sink_path:
            raise SettingsError("idempotent-sink needs sink_path (the SQLite file)")
        if mode in POSTGRES_MODES:
            if not self.sink_dsn:
                raise SettingsError(f"{mode} needs sink_dsn (the PostgreSQL database)")
            return self
        if mode != "idempotent-sink" and not self.sink_topic:
            raise SettingsError(f"{mode} needs sink_topic")
        return self


_TYPES: dict[str, type] = {
    "bootstrap_servers": str,
    "source_topic": str,
    "group_id": str,
    "sink_topic": str,
    "sink_path": str,
    "sink_table": str,
    "position_path": str,
    "sink_dsn": str,
    "instance": str,
    "static_member": bool,
    "batch_size": int,
    "step_delay": float,
    "paced": bool,
    "session_timeout_ms": int,
    "client": dict,
}


def _fits(value: object, expected: type) -> bool:
    if expected is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
    return isinstance(value, expected)
