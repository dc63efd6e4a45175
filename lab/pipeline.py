"""What one lab pipeline is made of: its names, topics, dgm.toml entry, processor settings and
stamped producer settings. Shared by `run_lab` (bounded) and the continuous demo lab."""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
from psycopg.conninfo import conninfo_to_dict

from dgm.config.external_sinks import ExternalSink
from dgm.config.loader import append_pipeline
from dgm.config.pipelines import PipelineConfig, Semantic
from dgm.config.problems import ConfigError
from lab.processors.postgres_sink import INCREMENTAL_COLUMN
from lab.processors.settings import POSTGRES_MODES, Mode, ProcessorSettings
from lab.processors.sqlite_sink import ID_COLUMN, SOURCE_COLUMNS
from lab.producer import ProducerSettings
from lab.supervisor import KillAim
from lab.topics import create_topic

Progress = Callable[[str], None]

# The semantic each mode claims: what dgm's verdict is compared against.
DECLARED: dict[str, Semantic] = {
    "at-most-once": "at-most-once",
    "at-least-once": "at-least-once",
    "exactly-once": "exactly-once",
    "exactly-once-broken": "exactly-once",
    "idempotent-sink": "exactly-once",
    "postgres-exactly-once": "exactly-once",
    "postgres-at-least-once": "at-least-once",
}
# Where a kill shows what the mode is made of.
DEFAULT_AIM: dict[str, KillAim] = {"at-most-once": "between-commit-and-produce"}
# Every k-th source transaction aborted, for the modes whose source is transactional.
DEFAULT_ABORT_EVERY = {"exactly-once": 4, "exactly-once-broken": 3}
SINK_TABLE = "lab_sink"


def say_on_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class PipelineNames:
    source: str
    sink: str
    group: str

    @classmethod
    def derive(cls, pipeline: str) -> PipelineNames:
        """Names unique to one run: `<pipeline>-<8 hex>-source`, `...-sink`, group `...`."""
        return cls.fixed(f"{pipeline}-{uuid.uuid4().hex[:8]}")

    @classmethod
    def fixed(cls, base: str) -> PipelineNames:
        """`<base>-source`, `<base>-sink`, group `<base>`: the same every time."""
        return cls(f"{base}-source", f"{base}-sink", base)


def has_sink_topic(mode: Mode) -> bool:
    return mode != "idempotent-sink" and mode not in POSTGRES_MODES


def sink_table(mode: Mode, names: PipelineNames) -> str:
    """The table a run writes: its own in a shared PostgreSQL database, else SINK_TABLE."""
    if mode not in POSTGRES_MODES:
        return SINK_TABLE
    return re.sub(r"[^a-z0-9_]", "_", f"{SINK_TABLE}_{names.group}".lower())[:63]


def jdbc_url(dsn: str) -> tuple[str, str]:
    """(JDBC URL, user) of a libpq connection string; the password stays out of both."""
    info = conninfo_to_dict(dsn)
    host, port = info.get("host") or "127.0.0.1", info.get("port") or 5432
    database = info.get("dbname") or "postgres"
    return f"jdbc:postgresql://{host}:{port}/{database}", str(info.get("user") or "")


def kill_aim(mode: Mode, kill_at: KillAim | None = None) -> KillAim:
    return kill_at or DEFAULT_AIM.get(mode, "between-produce-and-commit")


def sink_path(run_dir: Path) -> Path:
    return (run_dir / "sink.sqlite").absolute()


def create_topics(
    admin: AdminClient, mode: Mode, names: PipelineNames, partitions: int, replication: int
) -> None:
    for topic in (names.source, names.sink if has_sink_topic(mode) else None):
        if topic:
            create_topic(admin, topic, partitions, replication)


def pipeline_config(
    pipeline: str, mode: Mode, names: PipelineNames, run_dir: Path, dsn: str = ""
) -> PipelineConfig:
    external = None
    if mode in POSTGRES_MODES:
        url, user = jdbc_url(dsn)
        external = ExternalSink(
            table=sink_table(mode, names),
            id_column=ID_COLUMN,
            kind="postgresql",
            source_columns=SOURCE_COLUMNS,
            url=url,
            incremental_column=INCREMENTAL_COLUMN,
            user=user,
        )
    elif not has_sink_topic(mode):
        external = ExternalSink(
            path=sink_path(run_dir),
            table=SINK_TABLE,
            id_column=ID_COLUMN,
            kind="sqlite",
            source_columns=SOURCE_COLUMNS,
        )
    return PipelineConfig(
        name=pipeline,
        source_topics=(names.source,),
        sink_topics=() if external else (names.sink,),
        consumer_group=names.group,
        declared_semantic=DECLARED.get(mode, "exactly-once"),
        external_sink=external,
    )


def processor_settings(
    mode: Mode,
    bootstrap_servers: str,
    names: PipelineNames,
    run_dir: Path,
    *,
    batch_size: int,
    step_delay: float,
    client: dict[str, str],
    sink_dsn: str = "",
) -> ProcessorSettings:
    return ProcessorSettings(
        bootstrap_servers=bootstrap_servers,
        source_topic=names.source,
        group_id=names.group,
        sink_topic=names.sink if has_sink_topic(mode) else "",
        sink_path=str(sink_path(run_dir)),
        sink_table=sink_table(mode, names),
        sink_dsn=sink_dsn,
        batch_size=batch_size,
        step_delay=step_delay,
        client=dict(client),
    )


def producer_settings(
    mode: Mode,
    bootstrap_servers: str,
    names: PipelineNames,
    run_dir: Path,
    *,
    messages: int,
    rate: float | None,
    idempotence: bool,
    abort_every: int | None,
    client: dict[str, str],
    max_in_flight: int | None = None,
) -> ProducerSettings:
    """The stamped source producer of a pipeline; transactional (with aborts) for the modes
    that read a transactional source. `bootstrap_servers` may be the fault proxies'."""
    transactional = mode in DEFAULT_ABORT_EVERY
    if abort_every is None:
        abort_every = DEFAULT_ABORT_EVERY.get(mode, 0)
    return ProducerSettings(
        bootstrap_servers=bootstrap_servers,
        topic=names.source,
        messages=messages,
        ledger_path=run_dir / "ledger.jsonl",
        rate=rate,
        enable_idempotence=idempotence or transactional,
        max_in_flight=max_in_flight,
        transactional_id=f"{names.group}-source" if transactional else None,
        abort_every=abort_every if transactional else 0,
        client=dict(client),
    )


def add_to_config(path: Path | None, pipeline: PipelineConfig, say: Progress) -> str | None:
    """Append the pipeline so the rest of dgm monitors it; why not, if it cannot be done (the
    run's results stay valid: the report still names everything)."""
    if path is None:
        return None
    try:
        append_pipeline(path, pipeline)
    except (OSError, ConfigError) as error:
        say(f"warning: pipeline {pipeline.name} not added to {path}: {error}")
        return str(error)
    say(f"pipeline {pipeline.name} added to {path}")
    return None
