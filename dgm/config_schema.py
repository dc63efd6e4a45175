"""What dgm.toml may say: every setting, documented where it is declared.

The classes are frozen dataclasses so one loaded config can be shared by threads and stages.
`dgm.config` walks these declarations (field names, types, defaults) to load a file, so adding
a setting means adding a field here, with its comment, and nothing else. Checks that a type
cannot express live in each class's `problems()`, next to the fields they check.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from dgm.errors import UserFacingError


class ConfigError(UserFacingError):
    """The config (file or environment) says something dgm cannot use; the message names the key."""


Semantic = Literal["at-most-once", "at-least-once", "exactly-once"]
SEMANTICS: tuple[str, ...] = get_args(Semantic)
IdKind = Literal["header", "json_field", "key", "hash"]

# A failed check: (key relative to the checked table, "" for the table itself; what is wrong).
Problem = tuple[str, str]

# Pipeline names become file and partition names downstream, so keep them path-safe.
_PIPELINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")

# Client settings whose values are credentials. Matched on the lower-cased key.
_SECRET_WORDS = ("password", "secret", "jaas", "token")
_SECRET_SUFFIXES = (".key", "key.pem", "keystore.key")


def is_secret_key(key: str) -> bool:
    """True for a client setting whose value must never be printed (e.g. sasl.password)."""
    key = key.lower()
    return any(word in key for word in _SECRET_WORDS) or key.endswith(_SECRET_SUFFIXES)


def redacted(settings: Mapping[str, str]) -> dict[str, str]:
    """A copy of client settings that is safe to log: secret values replaced by '***'."""
    return {key: "***" if is_secret_key(key) else value for key, value in settings.items()}


def _empty_names(key: str, names: tuple[str, ...]) -> Iterator[Problem]:
    for index, name in enumerate(names):
        if not name.strip():
            yield f"{key}[{index}]", f"expected a non-empty name, got {name!r}"


@dataclass(frozen=True)
class MessageIdRule:
    """How to find a message's id, in DESIGN's order of preference."""

    # header: a record header; json_field: a field of a JSON value; key: the record key;
    # hash: a hash of key and value (for pipelines that carry no id at all).
    kind: IdKind = "header"
    # The header name for kind=header; a dotted JSON path (order.id) for kind=json_field;
    # ignored otherwise.
    name: str = "dgm-id"

    def problems(self) -> Iterator[Problem]:
        if self.kind == "header" and not self.name:
            yield "name", "expected a header name, got ''"
        if self.kind == "json_field" and not all(self.name.split(".")):
            yield "name", f"expected a dotted JSON path like 'order.id', got {self.name!r}"


@dataclass(frozen=True)
class ExternalSink:
    """A pipeline whose sink is a table rather than a topic (results stored in a database)."""

    # DuckDB or SQLite file; a relative path is relative to the config file's directory.
    path: Path
    table: str
    # Column holding the message id (the same id the source's MessageIdRule finds).
    id_column: str
    kind: Literal["duckdb", "sqlite"] = "duckdb"
    # Optional columns holding where a row came from (source topic/partition/offset), for
    # root-cause analysis of duplicates; empty when the sink does not record it.
    source_columns: tuple[str, ...] = ()

    def problems(self) -> Iterator[Problem]:
        for key in ("table", "id_column"):
            if not getattr(self, key).strip():
                yield key, "expected a non-empty name, got ''"
        yield from _empty_names("source_columns", self.source_columns)


@dataclass(frozen=True, kw_only=True)  # kw_only: a required field follows a defaulted one
class PipelineConfig:
    """One monitored pipeline: what it reads, what it writes, and what it claims to guarantee."""

    # Unique across pipelines; letters, digits, '.', '_', '-' (it names files downstream).
    name: str
    source_topics: tuple[str, ...]
    sink_topics: tuple[str, ...] = ()
    # The group whose committed offsets say what the pipeline claims to have processed.
    consumer_group: str
    # What the team configured the pipeline for; the verdict is compared against it.
    declared_semantic: Semantic
    message_id: MessageIdRule = MessageIdRule()
    # Set when the pipeline writes to a table instead of (or as well as) sink topics.
    external_sink: ExternalSink | None = None

    def problems(self) -> Iterator[Problem]:
        if not _PIPELINE_NAME.fullmatch(self.name):
            yield "name", f"expected letters, digits, '.', '_' or '-', got {self.name!r}"
        if not self.source_topics:
            yield "source_topics", "expected at least one topic, got []"
        yield from _empty_names("source_topics", self.source_topics)
        yield from _empty_names("sink_topics", self.sink_topics)
        if not self.consumer_group.strip():
            yield "consumer_group", "expected a consumer group id, got ''"
        if not self.sink_topics and self.external_sink is None:
            yield "", "expected sink_topics or an external_sink table, got neither"

    def sink_names(self) -> tuple[str, ...]:
        """The sink topics, and for an external sink the name its fingerprints carry as their
        topic ('external:<pipeline>:<table>'), unique per pipeline."""
        external = (
            (f"external:{self.name}:{self.external_sink.table}",) if self.external_sink else ()
        )
        return (*self.sink_topics, *external)


@dataclass(frozen=True, repr=False)  # repr below redacts credentials
class ClusterConfig:
    """How to reach the Kafka cluster, for the Python clients and for Spark."""

    # None: use the embedded broker started by `dgm broker start`.
    bootstrap_servers: str | None = None
    # librdkafka settings passed through verbatim (security.protocol, sasl.*, ssl.*).
    client: dict[str, str] = field(default_factory=dict)
    # Java client settings for Spark's Kafka source (sasl.jaas.config, ssl.truststore.*),
    # without Spark's "kafka." prefix: the Spark job adds it.
    java_client: dict[str, str] = field(default_factory=dict)

    def librdkafka_config(self, bootstrap_servers: str) -> dict[str, str]:
        """Settings for confluent-kafka clients; the caller decides the bootstrap servers."""
        return {"bootstrap.servers": bootstrap_servers, **self.client}

    def problems(self) -> Iterator[Problem]:
        if self.bootstrap_servers is not None and not self.bootstrap_servers.strip():
            yield "bootstrap_servers", "expected host:port[,host:port...], got ''"
        # One source of truth for the address: a second one in the pass-through would win
        # silently in one client and not in the other.
        for table, settings in (("client", self.client), ("java_client", self.java_client)):
            for key in settings:
                if key in ("bootstrap.servers", "kafka.bootstrap.servers"):
                    yield f"{table}.{key}", "set cluster.bootstrap_servers instead"
                elif table == "java_client" and key.startswith("kafka."):
                    yield f"{table}.{key}", "expected the key without Spark's 'kafka.' prefix"

    def __repr__(self) -> str:
        return (
            f"ClusterConfig(bootstrap_servers={self.bootstrap_servers!r}, "
            f"client={redacted(self.client)!r}, java_client={redacted(self.java_client)!r})"
        )


@dataclass(frozen=True)
class CollectorSettings:
    """What the collectors sample and how often."""

    # Seconds between two samples of the cluster; > 0.
    interval_s: float = 10.0
    # Regexes (re.search) over topic names: a topic is sampled when it matches an include
    # pattern and no exclude pattern. The default skips internal topics (__consumer_offsets).
    include_topics: tuple[str, ...] = (".*",)
    exclude_topics: tuple[str, ...] = ("^__",)

    def problems(self) -> Iterator[Problem]:
        if not (math.isfinite(self.interval_s) and self.interval_s > 0):
            yield "interval_s", f"expected a number of seconds > 0, got {self.interval_s!r}"
        for key in ("include_topics", "exclude_topics"):
            for index, pattern in enumerate(getattr(self, key)):
                try:
                    re.compile(pattern)
                except re.error as error:
                    yield f"{key}[{index}]", f"expected a regex, got {pattern!r} ({error})"


@dataclass(frozen=True)
class AnalysisSettings:
    """How `dgm analyze` audits and judges (see DESIGN.md's definitions)."""

    # Seconds between two analysis runs of `dgm analyze` without --once; > 0.
    interval_s: float = 60.0
    # Length of a metrics window in seconds (by the records' Kafka timestamps); >= 1.
    window_s: int = 60
    # A source record below the group's committed offset counts as lost only when it is older
    # than this and still has no sink copy: the sink write may simply not be visible yet.
    grace_s: float = 30.0
    # Fingerprints older than this many hours are compacted away; duplicate detection spans
    # the retention, not one batch. > 0.
    retention_h: float = 168.0
    # Spark master URL; local[*] runs Spark inside dgm. DGM_SPARK_MASTER overrides it.
    spark_master: str = "local[*]"
    # Fewer checked records than this gives the verdict "insufficient evidence". >= 1.
    min_records: int = 100

    def problems(self) -> Iterator[Problem]:
        for key in ("interval_s", "grace_s", "retention_h"):
            value = getattr(self, key)
            bound = ">= 0" if key == "grace_s" else "> 0"
            if not (math.isfinite(value) and (value >= 0 if bound == ">= 0" else value > 0)):
                yield key, f"expected a number {bound}, got {value!r}"
        if self.window_s < 1:
            yield "window_s", f"expected a whole number of seconds >= 1, got {self.window_s!r}"
        if self.min_records < 1:
            yield "min_records", f"expected a count >= 1, got {self.min_records!r}"
        if not self.spark_master.strip():
            yield "spark_master", "expected a Spark master URL like local[*], got ''"


@dataclass(frozen=True)
class DgmConfig:
    """The whole of dgm.toml, after validation, defaults and environment overrides."""

    # The file it was loaded from; None when running on defaults. Not a key in the file.
    source: Path | None = field(default=None, metadata={"toml": False})
    # Where dgm keeps samples, fingerprints, the DuckDB store and the embedded broker.
    # Relative to the config file's directory (or the working directory without a file).
    state_dir: Path = Path(".dgm")
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    collectors: CollectorSettings = field(default_factory=CollectorSettings)
    analysis: AnalysisSettings = field(default_factory=AnalysisSettings)
    pipelines: tuple[PipelineConfig, ...] = ()

    def pipeline(self, name: str) -> PipelineConfig:
        """The pipeline called `name`; ConfigError (with a suggestion) if there is none."""
        for pipeline in self.pipelines:
            if pipeline.name == name:
                return pipeline
        names = [p.name for p in self.pipelines]
        close = difflib.get_close_matches(name, names, n=1)
        hint = (
            f"did you mean {close[0]!r}?"
            if close
            else f"configured: {', '.join(names)}"
            if names
            else "no pipelines configured"
        )
        where = self.source if self.source is not None else "config"
        raise ConfigError(f"{where}: unknown pipeline {name!r} ({hint})")

    def problems(self) -> Iterator[Problem]:
        first_index: dict[str, int] = {}
        for index, pipeline in enumerate(self.pipelines):
            if pipeline.name in first_index:
                yield (
                    f"pipelines[{index}].name",
                    f"expected a unique name, got {pipeline.name!r} again "
                    f"(first at pipelines[{first_index[pipeline.name]}])",
                )
            first_index.setdefault(pipeline.name, index)
