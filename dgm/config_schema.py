"""What dgm.toml may say: every setting, documented where it is declared.

The classes are frozen dataclasses so one loaded config can be shared by threads and stages.
`dgm.config` walks these declarations (field names, types, defaults) to load a file, so adding
a setting means adding a field here, with its comment, and nothing else. Checks that a type
cannot express live in each class's `problems()`, next to the fields they check.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, get_args

from dgm.alert_metrics import ALERT_METRICS
from dgm.client_settings import JAVA as JAVA_CLIENT_NAME
from dgm.client_settings import (
    java_client_refusals,
    java_settings,
    kafka_python_settings,
    refusals,
)
from dgm.clusters import DEFAULT_CLUSTER, SEPARATOR, qualified
from dgm.errors import UserFacingError
from dgm.sampling import KEEP_ALL, sample_conflicts


class ConfigError(UserFacingError):
    """The config (file or environment) says something dgm cannot use; the message names the key."""


# A Literal so mypy checks the config; its words are dgm.vocabulary.DECLARABLE, in order
# (tests/dgm/test_config.py holds the two equal).
Semantic = Literal["at-most-once", "at-least-once", "exactly-once"]
SEMANTICS: tuple[str, ...] = get_args(Semantic)
IdKind = Literal["header", "json_field", "key", "hash"]
# The claim kinds: dgm.vocabulary.ClaimKind's words, in order (tests/dgm/test_config.py holds
# the two equal).
ClaimName = Literal["group", "deadline"]
CLAIMS: tuple[str, ...] = get_args(ClaimName)

# A failed check: (key relative to the checked table, "" for the table itself; what is wrong).
Problem = tuple[str, str]

# Pipeline names become file and partition names downstream, so keep them path-safe.
_PIPELINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# An HTTP header name (RFC 9110 token, without the rarely used punctuation).
_HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")

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

    def same_as(self, other: MessageIdRule) -> bool:
        """Whether both find the same id (the name matters only for header and json_field)."""
        named = ("header", "json_field")
        return self.kind == other.kind and (self.kind not in named or self.name == other.name)

    def problems(self) -> Iterator[Problem]:
        if self.kind == "header" and not self.name:
            yield "name", "expected a header name, got ''"
        if self.kind == "json_field" and not all(self.name.split(".")):
            yield "name", f"expected a dotted JSON path like 'order.id', got {self.name!r}"


ExternalKind = Literal["duckdb", "sqlite", "postgresql", "jdbc"]
FILE_KINDS = ("duckdb", "sqlite")
# What kind = "postgresql" defaults to: the driver class and its Maven Central coordinates.
POSTGRESQL_DRIVER = "org.postgresql.Driver"
POSTGRESQL_DRIVER_PACKAGE = "org.postgresql:postgresql:42.7.10"
_MAVEN_COORDINATES = re.compile(r"[\w.-]+:[\w.-]+:[\w.+-]+")
_JDBC_SECRET_IN_URL = re.compile(r"password\s*=", re.IGNORECASE)


@dataclass(frozen=True, repr=False)  # repr below redacts the password
class ExternalSink:
    """A pipeline whose sink is a table rather than a topic (results stored in a database)."""

    # DuckDB or SQLite file (kind duckdb/sqlite; required there, unused otherwise); a relative
    # path is relative to the config file's directory.
    path: Path | None = None
    # Required. For postgresql/jdbc it may be schema-qualified (sales.orders).
    table: str = ""
    # Required: column holding the message id (the same id the source's MessageIdRule finds).
    id_column: str = ""
    # duckdb/sqlite: a file read whole each cycle. postgresql/jdbc: a table read through
    # Spark's JDBC source, incrementally by incremental_column.
    kind: ExternalKind = "duckdb"
    # Optional columns holding where a row came from (source topic/partition/offset), for
    # root-cause analysis of duplicates; empty when the sink does not record it.
    source_columns: tuple[str, ...] = ()
    # postgresql/jdbc: the JDBC URL (jdbc:postgresql://host:5432/db), without credentials.
    url: str = ""
    # postgresql/jdbc: a column that only grows for new rows, a serial (BIGSERIAL, identity)
    # or a timestamp set on insert; each cycle reads the rows above the last value it read.
    # Index it: that read is `WHERE column > last`.
    incremental_column: str = ""
    # postgresql/jdbc credentials. Write the password as "${ENV_VAR}": it is never printed.
    user: str = ""
    password: str = ""
    # jdbc: the driver class and its Maven coordinates (group:artifact:version), resolved from
    # Maven Central like the Kafka source; postgresql defaults to PostgreSQL's own driver.
    driver: str = ""
    driver_package: str = ""

    def problems(self) -> Iterator[Problem]:
        for key in ("table", "id_column"):
            value = getattr(self, key)
            if not value:
                yield key, "missing required key (expected a string)"
            elif not value.strip():
                yield key, "expected a non-empty name, got ''"
        yield from _empty_names("source_columns", self.source_columns)
        if self.kind in FILE_KINDS:
            yield from self._file_problems()
        else:
            yield from self._jdbc_problems()

    def _file_problems(self) -> Iterator[Problem]:
        if self.path is None:
            yield "path", f"missing required key (expected the {self.kind} file's path)"
        for key in ("url", "incremental_column", "user", "password", "driver", "driver_package"):
            if getattr(self, key):
                yield key, f"only for kind 'postgresql' or 'jdbc', not {self.kind!r}"

    def _jdbc_problems(self) -> Iterator[Problem]:
        if self.path is not None:
            yield "path", f"only for kind 'duckdb' or 'sqlite'; kind {self.kind!r} uses url"
        prefix = "jdbc:postgresql:" if self.kind == "postgresql" else "jdbc:"
        if not self.url:
            yield "url", f"missing required key (expected a JDBC URL like {prefix}//host/db)"
        elif not self.url.startswith(prefix):
            yield "url", f"expected a URL starting with {prefix!r}"
        elif _JDBC_SECRET_IN_URL.search(self.url):
            yield "url", 'holds a password: set external_sink.password ("${ENV_VAR}") instead'
        if not self.incremental_column.strip():
            yield (
                "incremental_column",
                "missing required key (expected a serial or timestamp column that grows with "
                "each new row)",
            )
        if self.kind == "jdbc":
            if not self.driver.strip():
                yield "driver", "missing required key (expected the JDBC driver class)"
            if not self.driver_package.strip():
                yield "driver_package", "missing required key (expected group:artifact:version)"
        if self.driver_package and not _MAVEN_COORDINATES.fullmatch(self.driver_package):
            yield "driver_package", f"expected group:artifact:version, got {self.driver_package!r}"

    def jdbc_driver(self) -> tuple[str, str]:
        """(driver class, Maven coordinates) for a postgresql/jdbc sink."""
        if self.kind == "postgresql":
            return (
                self.driver or POSTGRESQL_DRIVER,
                self.driver_package or POSTGRESQL_DRIVER_PACKAGE,
            )
        return self.driver, self.driver_package

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.password:
            shown["password"] = "***"
        inner = ", ".join(f"{name}={value!r}" for name, value in shown.items())
        return f"ExternalSink({inner})"


_QUOTES = {"'": "'", '"': '"', "`": "`"}


def predicate_problems(predicate: str) -> Iterator[str]:
    """A cheap syntax check of an `expected` predicate without Spark: not blank when set,
    one statement, quotes closed, parentheses balanced. Spark's own analysis at start-up
    (spark_jobs.audit.expected.check_predicates) catches the rest."""
    if not predicate:
        return
    if not predicate.strip():
        yield 'expected a Spark SQL predicate or "" (every record), got blanks'
        return
    depth, quote, index = 0, "", 0
    while index < len(predicate):
        char = predicate[index]
        if quote:
            if char == "\\" and quote != "`":
                index += 1
            elif char == quote:
                quote = ""
        elif char in _QUOTES:
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                yield f"unbalanced ')' at character {index + 1} of the predicate"
                return
        elif char == ";":
            yield "expected one predicate, got ';'"
            return
        index += 1
    if quote:
        yield f"unclosed {quote} in the predicate"
    elif depth:
        yield "unbalanced '(' in the predicate"


def _on(cluster: str, topic: str) -> str:
    """`topic` of `cluster`, qualified once: checks run on the file's plain names and again
    on the loaded (already qualified) ones; a Kafka topic name holds no SEPARATOR."""
    return topic if SEPARATOR in topic else qualified(cluster, topic)


@dataclass(frozen=True, kw_only=True)  # kw_only: a required field follows a defaulted one
class PipelineConfig:
    """One monitored pipeline: what it reads, what it writes, and what it claims to guarantee."""

    # Unique across pipelines; letters, digits, '.', '_', '-' (it names files downstream).
    name: str
    source_topics: tuple[str, ...]
    sink_topics: tuple[str, ...] = ()
    # The group whose committed offsets say what the pipeline claims to have processed.
    # Required with claim = "group"; with claim = "deadline" optional, and then only the
    # group's rebalances and member changes are counted as faults.
    consumer_group: str = ""
    # What the team configured the pipeline for; the verdict is compared against it.
    declared_semantic: Semantic
    message_id: MessageIdRule = MessageIdRule()
    # Set when the pipeline writes to a table instead of (or as well as) sink topics.
    external_sink: ExternalSink | None = None
    # What says a source record should already be in the sink (docs/design.md, "claim"):
    # "group": it is below consumer_group's committed offset (or, for an external sink, below
    # the highest source offset its rows store + 1); "deadline": it is older than max_delay,
    # for processors whose offsets Kafka cannot see (MirrorMaker 2, Flink, Spark Structured
    # Streaming, Kafka Connect, a processor keeping its own position).
    claim: ClaimName = "group"
    # claim = "deadline": a duration like "30s", "5m", "1h" (s, m, h or d), > 0. A record
    # with no sink copy once it is older than this is lost ("not in sink within max_delay");
    # a copy timestamped later than the record + max_delay is a late record (not lost).
    max_delay: str = ""
    # Which source records the pipeline is meant to deliver: a Spark SQL predicate over the
    # source record as Spark's Kafka source gives it (key, value, topic, partition, offset,
    # timestamp, headers), e.g. "get_json_object(CAST(value AS STRING), '$.type') !=
    # 'heartbeat'". Records it is false for are filtered: counted, never checked, never lost.
    # A record it is NULL for (malformed JSON) is expected and counted as filter_undecided.
    # "" expects every source record.
    expected: str = ""
    # The id rule of the source topics and of the sink topics; each defaults to message_id.
    source_message_id: MessageIdRule | None = None
    sink_message_id: MessageIdRule | None = None
    # The cluster the source topics (and consumer_group) live on, and the one the sink topics
    # live on: "default" ([cluster]) or a name of [clusters.<name>]. Once loaded, the topics
    # and group of a cluster other than the default one are qualified ('<cluster>/<topic>',
    # dgm.clusters): the names every stage and published table use.
    source_cluster: str = DEFAULT_CLUSTER
    sink_cluster: str = DEFAULT_CLUSTER
    # Keep the fingerprints of 1 in this many message ids, chosen by the id's hash, on every
    # side (docs/design.md, "Sampled pipelines"); unset: analysis.sample_one_in. Pipelines
    # that share a topic sample it alike. >= 1.
    sample_one_in: int | None = None

    def problems(self) -> Iterator[Problem]:
        if not _PIPELINE_NAME.fullmatch(self.name):
            yield "name", f"expected letters, digits, '.', '_' or '-', got {self.name!r}"
        if not self.source_topics:
            yield "source_topics", "expected at least one topic, got []"
        yield from _empty_names("source_topics", self.source_topics)
        yield from _empty_names("sink_topics", self.sink_topics)
        yield from _cluster_topic_problems(self)
        yield from self._claim_problems()
        if not self.sink_topics and self.external_sink is None:
            yield "", "expected sink_topics or an external_sink table, got neither"
        yield from (("expected", problem) for problem in predicate_problems(self.expected))
        if self.sample_one_in is not None and self.sample_one_in < KEEP_ALL:
            yield "sample_one_in", f"expected 1 or more, got {self.sample_one_in}"

    def source_id_rule(self) -> MessageIdRule:
        """The id rule of the source topics: source_message_id, else message_id."""
        return self.source_message_id or self.message_id

    def sink_id_rule(self) -> MessageIdRule:
        """The id rule of the sink topics: sink_message_id, else message_id."""
        return self.sink_message_id or self.message_id

    def topic_id_rules(self) -> Iterator[tuple[str, MessageIdRule, str]]:
        """(topic as dgm identifies it, its id rule, the key that sets it) for every source
        and sink topic: one topic name on two clusters is two topics."""
        source_key = "source_message_id" if self.source_message_id else "message_id"
        sink_key = "sink_message_id" if self.sink_message_id else "message_id"
        for topic in self.source_topics:
            yield _on(self.source_cluster, topic), self.source_id_rule(), source_key
        for topic in self.sink_topics:
            yield _on(self.sink_cluster, topic), self.sink_id_rule(), sink_key

    def _claim_problems(self) -> Iterator[Problem]:
        if self.consumer_group and not self.consumer_group.strip():
            yield "consumer_group", f"expected a consumer group id, got {self.consumer_group!r}"
        if self.claim == "group":
            if not self.consumer_group:
                yield (
                    "consumer_group",
                    'missing required key with claim = "group" (expected a consumer group '
                    'id, or claim = "deadline" with a max_delay)',
                )
            if self.max_delay:
                yield "max_delay", 'only for claim = "deadline"'
            return
        if not self.max_delay:
            yield (
                "max_delay",
                'missing required key with claim = "deadline" (expected a duration like "30s", '
                '"5m", "1h")',
            )
            return
        try:
            duration(self.max_delay)
        except ValueError as error:
            yield "max_delay", str(error)

    def with_qualified_names(self) -> PipelineConfig:
        """This pipeline with its source topics and consumer group qualified by its source
        cluster and its sink topics by its sink cluster (dgm.clusters; the group is the
        source side's: it consumes)."""
        source, sink = self.source_cluster, self.sink_cluster
        group = qualified(source, self.consumer_group) if self.consumer_group else ""
        return dataclasses.replace(
            self,
            source_topics=tuple(qualified(source, t) for t in self.source_topics),
            sink_topics=tuple(qualified(sink, t) for t in self.sink_topics),
            consumer_group=group,
        )

    def deadline(self) -> timedelta | None:
        """max_delay of a deadline claim; None for a group claim."""
        return duration(self.max_delay) if self.claim == "deadline" else None

    def sink_names(self) -> tuple[str, ...]:
        """The sink topics, and for an external sink the name its fingerprints carry as their
        topic ('external:<pipeline>:<table>'), unique per pipeline."""
        external = (
            (f"external:{self.name}:{self.external_sink.table}",) if self.external_sink else ()
        )
        return (*self.sink_topics, *external)


def _cluster_topic_problems(pipeline: PipelineConfig) -> Iterator[Problem]:
    """A topic written with a cluster in its name: the cluster is a key of its own."""
    for key, cluster_key in (("source_topics", "source_cluster"), ("sink_topics", "sink_cluster")):
        for index, topic in enumerate(getattr(pipeline, key)):
            if SEPARATOR in topic:
                yield (
                    f"{key}[{index}]",
                    f"expected a Kafka topic name (no '{SEPARATOR}'), got {topic!r}; name the "
                    f"topic's cluster with {cluster_key}",
                )


@dataclass(frozen=True, repr=False)  # repr below redacts credentials
class ClusterConfig:
    """How to reach the Kafka cluster, for the Python clients and for Spark."""

    # None: use the embedded broker started by `dgm broker start`.
    bootstrap_servers: str | None = None
    # librdkafka settings (security.protocol, sasl.*, ssl.*), for all three clients: passed
    # to confluent-kafka as written, translated for kafka-python and Spark's Java client by
    # dgm.client_settings' one table; a key one of them cannot take is refused.
    client: dict[str, str] = field(default_factory=dict)
    # Spark's fetch tuning only (dgm.client_settings.JAVA_FETCH_TUNING: fetch.max.wait.ms,
    # max.partition.fetch.bytes, ...), Java names without Spark's "kafka." prefix: Spark's
    # consumer is the one client that fetches records.
    java_client: dict[str, str] = field(default_factory=dict)

    def librdkafka_config(self, bootstrap_servers: str) -> dict[str, str]:
        """Settings for confluent-kafka clients; the caller decides the bootstrap servers."""
        return {"bootstrap.servers": bootstrap_servers, **self.client}

    def kafka_python_config(self, bootstrap_servers: str) -> dict[str, Any]:
        """KafkaAdminClient arguments, translated from `client` (an OIDC token provider comes
        as dgm.oidc.OidcClientCredentials, for the caller to wrap)."""
        return {"bootstrap_servers": bootstrap_servers, **kafka_python_settings(self.client)}

    def spark_client(self) -> dict[str, str]:
        """Java client settings for Spark: `client` translated, then the fetch tuning.
        ConfigError when a client certificate's files cannot be read or converted."""
        try:
            return {**java_settings(self.client), **self.java_client}
        except (OSError, ValueError) as error:
            raise ConfigError(f"cluster.client: for {JAVA_CLIENT_NAME}: {error}") from None

    def problems(self) -> Iterator[Problem]:
        if self.bootstrap_servers is not None and not self.bootstrap_servers.strip():
            yield "bootstrap_servers", "expected host:port[,host:port...], got ''"
        # One source of truth for the address: a second one in the pass-through would win
        # silently in one client and not in the other.
        for table, settings in (("client", self.client), ("java_client", self.java_client)):
            for key in settings:
                if key in ("bootstrap.servers", "kafka.bootstrap.servers"):
                    yield f"{table}.{key}", "set cluster.bootstrap_servers instead"
        client = {k: v for k, v in self.client.items() if k != "bootstrap.servers"}
        for key, why in refusals(client):
            yield f"client.{key}", why
        tuning = {k: v for k, v in self.java_client.items() if "bootstrap.servers" not in k}
        for key, why in java_client_refusals(tuning):
            yield f"java_client.{key}", why

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


_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(s|m|h|d)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> timedelta:
    """A positive duration as the config writes them ("90s", "30m", "1h", "7d", "1.5h");
    ValueError with what was expected otherwise."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or float(match[1]) <= 0:
        raise ValueError(
            f'expected a duration > 0 like "30s", "5m", "1h" (s, m, h or d), got {text!r}'
        )
    return timedelta(seconds=float(match[1]) * _UNIT_S[match[2]])


def audit_start(text: str) -> Literal["earliest", "latest"] | timedelta:
    """`analysis.start` read: "earliest", "latest" or a positive duration ("90s", "30m", "1h",
    "7d", "1.5h"); ValueError with what was expected otherwise."""
    value = text.strip().lower()
    if value in ("earliest", "latest"):
        return "earliest" if value == "earliest" else "latest"
    match = _DURATION.fullmatch(value)
    if match is None or float(match[1]) <= 0:
        raise ValueError(
            'expected "earliest", "latest" or a duration like "30m", "1h", "7d" '
            f"(s, m, h or d), got {text!r}"
        )
    return timedelta(seconds=float(match[1]) * _UNIT_S[match[2]])


@dataclass(frozen=True)
class AnalysisSettings:
    """How `dgm analyze` audits and judges (see docs/design.md's definitions)."""

    # Seconds between the starts of two analysis runs of `dgm analyze` without --once (a run
    # that takes longer is followed at once); > 0. A run takes ~10 s on the demo's state
    # (bench/README.md), so a duplicate is published within a few tens of seconds.
    interval_s: float = 10.0
    # Length of a metrics window in seconds (by the records' Kafka timestamps); >= 1.
    window_s: int = 60
    # A source record below the group's committed offset counts as lost only when it is older
    # than this and still has no sink copy: the sink write may simply not be visible yet.
    grace_s: float = 30.0
    # Fingerprints older than this many hours are compacted away; duplicate detection spans
    # the retention, not one batch. Collector samples are kept as long (dgm.sample_upkeep).
    # > 0.
    retention_h: float = 168.0
    # Spark master URL; local[*] runs Spark inside dgm. `dgm analyze --master` overrides it.
    spark_master: str = "local[*]"
    # Fewer checked records than this gives the verdict "insufficient evidence". >= 1.
    min_records: int = 100
    # Consumer-group status (docs/design.md, "Consumer-group status") judges each partition
    # over its last this-many collector samples of the group's committed offset and lag from
    # the LSO (Burrow's sliding window: 10 samples at collectors.interval_s). >= 2.
    group_status_window: int = 10
    # Where the FIRST audit of a topic-partition (none audited yet) starts: "earliest" (the log
    # start offset), "latest" (the LSO sampled when dgm first sees the partition: only newer
    # records are audited), or a duration like "30m", "1h", "7d" (the first offset whose Kafka
    # timestamp is at most that old). Offsets before the start are recorded as before the
    # audit start: never audited later, never judged. Later audits always resume where the
    # previous one ended.
    start: str = "earliest"
    # The share of each cycle's newly audited offsets that is also read again from the
    # offsets already audited, to find logs truncated and rewritten (docs/design.md, "Log
    # integrity"); gathered until it makes 10,000 offsets. 0 reads again only around the
    # backwards moves the collectors record. 0 <= share <= 1.
    reread_share: float = 0.1
    # Every pipeline's id sample unless it sets its own: keep the fingerprints of 1 in this
    # many message ids (docs/design.md, "Sampled pipelines"); 1 keeps every id. >= 1.
    sample_one_in: int = KEEP_ALL

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
        if self.group_status_window < 2:
            yield (
                "group_status_window",
                f"expected a count of samples >= 2, got {self.group_status_window!r}",
            )
        if not self.spark_master.strip():
            yield "spark_master", "expected a Spark master URL like local[*], got ''"
        if not (math.isfinite(self.reread_share) and 0 <= self.reread_share <= 1):
            yield "reread_share", f"expected a share between 0 and 1, got {self.reread_share!r}"
        if self.sample_one_in < KEEP_ALL:
            yield "sample_one_in", f"expected 1 or more, got {self.sample_one_in}"
        try:
            audit_start(self.start)
        except ValueError as error:
            yield "start", str(error)


ALERT_COMPARISONS = (">", ">=", "<", "<=", "==")
ALERT_WINDOWS = ("cumulative", "latest")
ALERT_SEVERITIES = ("info", "warning", "critical")
_SCOPE_KINDS = ("pipeline", "topic", "group", "run")


def split_scope(scope: str, metric: str) -> tuple[str, str]:
    """(kind, fnmatch pattern) of a rule's scope: 'topic:orders-*' names the kind; a bare
    pattern ('orders-*') means the metric's first kind. A name containing ':' needs the kind."""
    kind, colon, pattern = scope.partition(":")
    if colon and kind in _SCOPE_KINDS:
        return kind, pattern
    return ALERT_METRICS.get(metric, ("pipeline",))[0], scope


def _scope_problems(scope: str, metric: str) -> Iterator[str]:
    kind, colon, _ = scope.partition(":")
    if colon and kind not in _SCOPE_KINDS:
        yield f"unknown scope kind {kind!r} (expected {', '.join(_SCOPE_KINDS)})"
        return
    kind, pattern = split_scope(scope, metric)
    if not pattern or pattern != pattern.strip() or not pattern.isprintable():
        yield f"expected an fnmatch pattern like 'orders-*', got {pattern!r}"
    elif pattern.count("[") != pattern.count("]") or "[]" in pattern:
        yield f"expected balanced [...] in the pattern, got {pattern!r}"
    elif kind == "run" and pattern != "*":
        yield f"a run-wide metric has one subject: expected '*', got {pattern!r}"
    if metric in ALERT_METRICS and kind not in ALERT_METRICS[metric]:
        fits = " or ".join(ALERT_METRICS[metric])
        yield f"metric {metric!r} is measured per {fits}, not per {kind}"


@dataclass(frozen=True, kw_only=True)  # kw_only: a required field follows a defaulted one
class AlertRule:
    """One [[alerts]] rule: fire when `metric` `comparison` `threshold` holds for `for_s`."""

    # Unique across dgm.toml's rules and the rules added on the dashboard's Alerts page.
    name: str
    # One of ALERT_METRICS: duplicate_rate, loss_rate, lost, aborted_reads, verdict_violates
    # (1 when a pipeline's verdict does not meet its declared semantic), lso_lag (records),
    # lso_stuck_s, hanging_transactions (count), consumer_lag_from_lso (records), group_status
    # (the group's worst partition status by severity: 0 OK, 1 WARN, 2 STALL, 3 STOP, 4 ERR,
    # 5 REWIND), staleness_s (seconds since the newest sample the published analysis read).
    metric: str
    # Which subjects: an fnmatch pattern over pipeline, topic or group names, optionally
    # prefixed by its kind ('topic:orders-*'); a bare pattern means the metric's own kind.
    scope: str = "*"
    # >, >=, <, <= or ==; the rule holds when `value comparison threshold`.
    comparison: str = ">"
    threshold: float
    # cumulative: totals over the retention; latest: the newest window (pipeline and topic
    # rates and counts only; offsets, lag and transactions are always the latest sample).
    window: str = "cumulative"
    # Seconds the condition must hold before the rule fires; >= 0.
    for_s: float = 0.0
    # info, warning or critical.
    severity: str = "warning"
    # Seconds between repeated notifications while the rule keeps firing; 0 = never repeat.
    renotify_s: float = 0.0

    def problems(self) -> Iterator[Problem]:
        rule = f"rule {self.name!r}"
        if not self.name.strip() or self.name != self.name.strip() or len(self.name) > 100:
            yield "name", f"expected a name of 1 to 100 characters, got {self.name!r}"
        if self.metric not in ALERT_METRICS:
            close = difflib.get_close_matches(self.metric, ALERT_METRICS, n=1)
            known = "expected one of " + ", ".join(ALERT_METRICS)
            hint = f"did you mean {close[0]!r}?" if close else known
            yield "metric", f"{rule}: unknown metric {self.metric!r} ({hint})"
        for problem in _scope_problems(self.scope, self.metric):
            yield "scope", f"{rule}: {problem}"
        for key, allowed in (
            ("comparison", ALERT_COMPARISONS),
            ("window", ALERT_WINDOWS),
            ("severity", ALERT_SEVERITIES),
        ):
            if getattr(self, key) not in allowed:
                expected = ", ".join(repr(a) for a in allowed)
                yield key, f"{rule}: expected one of {expected}, got {getattr(self, key)!r}"
        if not math.isfinite(self.threshold):
            yield "threshold", f"{rule}: expected a finite number, got {self.threshold!r}"
        for key in ("for_s", "renotify_s"):
            value = getattr(self, key)
            if not (math.isfinite(value) and value >= 0):
                yield key, f"{rule}: expected a number of seconds >= 0, got {value!r}"


WebhookFormat = Literal["json", "slack", "alertmanager"]


@dataclass(frozen=True)
class AlertWebhook:
    """[alerts_webhook]: where alert notifications are POSTed as JSON, besides the log line."""

    # http:// or https:// URL; "" sends log lines only. Never logged or shown in repr (it may
    # hold a token).
    url: str = field(default="", repr=False)
    # Base URL of the dashboard, for the link each notification carries.
    dashboard_url: str = "http://localhost:8501"
    # Seconds one POST may take; > 0. A failed POST is retried on later evaluations.
    timeout_s: float = 5.0
    # The body: json (dgm's fields plus a one-line `text`), slack (Slack/Mattermost incoming
    # webhook: `text` and one attachment) or alertmanager (Alertmanager's v2 API, POST
    # /api/v2/alerts: a list of one alert, endsAt set on resolution).
    format: WebhookFormat = "json"
    # HTTP headers sent with every POST (e.g. Authorization = "Bearer ${TOKEN}"). Values are
    # never logged, stored or shown in repr or errors.
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    def problems(self) -> Iterator[Problem]:
        for key in ("url", "dashboard_url"):
            value = getattr(self, key)
            if value and not value.startswith(("http://", "https://")):
                yield key, "expected an http:// or https:// URL"
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            yield "timeout_s", f"expected a number of seconds > 0, got {self.timeout_s!r}"
        for name, value in self.headers.items():
            if not _HEADER_NAME.fullmatch(name):
                yield f"headers.{name}", "expected an HTTP header name (letters, digits, '-')"
            elif any(c in value for c in "\r\n\0"):  # the value itself is never echoed
                yield f"headers.{name}", "expected a value without line breaks or NUL"


def id_rule_conflicts(pipelines: tuple[PipelineConfig, ...]) -> Iterator[Problem]:
    """A topic two pipelines (or both sides of one) read with different id rules: a
    fingerprint holds one message id, so the rules of every side naming a topic must agree."""
    first: dict[str, tuple[MessageIdRule, str]] = {}
    for index, pipeline in enumerate(pipelines):
        for topic, rule, key in pipeline.topic_id_rules():
            where = f"pipelines[{index}].{key}"
            seen, owner = first.setdefault(topic, (rule, f"pipeline {pipeline.name!r} {key}"))
            if not seen.same_as(rule):
                yield (
                    where,
                    f"topic {topic!r} has two message id rules: {owner} says {seen.kind} "
                    f"{seen.name!r}, pipeline {pipeline.name!r} {key} says {rule.kind} "
                    f"{rule.name!r}; a fingerprint holds one id, so give the topic one rule",
                )


Granularity = Literal["partition", "topic"]
GRANULARITIES: tuple[str, ...] = get_args(Granularity)


@dataclass(frozen=True)
class ExporterSettings:
    """What `dgm exporter` serves on /metrics."""

    # "partition": the per-topic series and, beside them, one series per partition (LSO lag
    # and stuck time per topic-partition, consumer lag per group and partition); "topic": the
    # per-topic series only, for clusters whose partitions would make too many series (as
    # KMinion's granularity).
    granularity: Granularity = "partition"


_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _clusters_problems(config: DgmConfig) -> Iterator[Problem]:
    """[clusters.<name>] names and addresses; each pipeline's clusters exist."""
    for name, cluster in config.clusters.items():
        if name == DEFAULT_CLUSTER:
            yield f"clusters.{name}", "the default cluster is [cluster]: give this one another name"
        elif not _CLUSTER_NAME.fullmatch(name):
            yield f"clusters.{name}", f"expected letters, digits, '.', '_' or '-', got {name!r}"
        if cluster.bootstrap_servers is None:
            yield (
                f"clusters.{name}.bootstrap_servers",
                "missing required key (expected host:port[,host:port...]; only the default "
                "[cluster] may use the embedded broker)",
            )
    known = (DEFAULT_CLUSTER, *sorted(config.clusters))
    for index, pipeline in enumerate(config.pipelines):
        for key in ("source_cluster", "sink_cluster"):
            value = getattr(pipeline, key)
            if value not in known:
                close = difflib.get_close_matches(value, known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                yield (
                    f"pipelines[{index}].{key}",
                    f"unknown cluster {value!r} ({hint}expected {DEFAULT_CLUSTER!r} or a "
                    f"[clusters.<name>] table: {', '.join(repr(k) for k in known)})",
                )


@dataclass(frozen=True)
class DashboardSettings:
    """[dashboard]: what the web dashboard may change."""

    # The Alerts page's form adds and deletes alert rules (in <state_dir>/alerts.sqlite) only
    # when true. Off by default: the dashboard has no login, so anyone who reaches its port
    # could change what alerts. Turn it on only where the dashboard binds loopback or sits
    # behind authentication (README.md, "The dashboard beyond loopback").
    allow_edits: bool = False


@dataclass(frozen=True)
class WatchSettings:
    """[watch]: the continuous reader of the sink topics (`dgm watch`; docs/design.md, "The
    watch"), which publishes the duplicates it sees within seconds."""

    # false: `dgm run` and `dgm demo` start no watch, and duplicates wait for the analysis.
    enabled: bool = True
    # Ids held to recognise a later copy, over every watched pipeline; past it the id seen
    # longest ago is forgotten (its later copies wait for the analysis). > 0.
    max_ids: int = 1_000_000
    # Records read back in every sink partition when the watch starts, so a copy of an id
    # written shortly before is recognised. >= 0.
    lookback: int = 10_000

    def problems(self) -> Iterator[Problem]:
        if self.max_ids < 1:
            yield "max_ids", f"expected 1 or more, got {self.max_ids}"
        if self.lookback < 0:
            yield "lookback", f"expected 0 or more, got {self.lookback}"


@dataclass(frozen=True)
class DgmConfig:
    """The whole of dgm.toml, after validation, defaults and environment overrides."""

    # The file it was loaded from; None when running on defaults. Not a key in the file.
    source: Path | None = field(default=None, metadata={"toml": False})
    # Where dgm keeps samples, fingerprints, the DuckDB store and the embedded broker.
    # Relative to the config file's directory (or the working directory without a file).
    state_dir: Path = Path(".dgm")
    # The cluster named "default".
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    # [clusters.<name>]: more clusters, each with the keys of [cluster] (bootstrap_servers
    # required); a pipeline names them in source_cluster / sink_cluster.
    clusters: dict[str, ClusterConfig] = field(default_factory=dict)
    collectors: CollectorSettings = field(default_factory=CollectorSettings)
    analysis: AnalysisSettings = field(default_factory=AnalysisSettings)
    pipelines: tuple[PipelineConfig, ...] = ()
    # [[alerts]] rules, evaluated after every analysis run (see alerts/).
    alerts: tuple[AlertRule, ...] = ()
    alerts_webhook: AlertWebhook = field(default_factory=AlertWebhook)
    exporter: ExporterSettings = field(default_factory=ExporterSettings)
    dashboard: DashboardSettings = field(default_factory=DashboardSettings)
    watch: WatchSettings = field(default_factory=WatchSettings)

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

    def with_qualified_names(self) -> DgmConfig:
        """The config the stages read: every pipeline's topics and group qualified. Applied
        once, by dgm.config.load_config; the file's text (and append_pipeline) keep plain
        names."""
        pipelines = tuple(p.with_qualified_names() for p in self.pipelines)
        return dataclasses.replace(self, pipelines=pipelines)

    def one_in(self, pipeline: PipelineConfig) -> int:
        """The pipeline's id sample: 1 in this many ids kept (1: every id)."""
        return pipeline.sample_one_in or self.analysis.sample_one_in

    def topic_one_in(self) -> dict[str, int]:
        """Every sampled topic (kept 1 in N ids, N > 1), an external sink's name among them,
        and its N; pipelines sharing a topic agree on it (problems)."""
        return {
            topic: self.one_in(p)
            for p in self.pipelines
            if self.one_in(p) > KEEP_ALL
            for topic in (
                *(t for t, _, _ in p.topic_id_rules()),
                *p.sink_names()[len(p.sink_topics) :],
            )
        }

    def cluster_config(self, name: str) -> ClusterConfig:
        """The settings of the cluster called `name` ("default": [cluster])."""
        return self.cluster if name == DEFAULT_CLUSTER else self.clusters[name]

    def sampled_clusters(self) -> tuple[str, ...]:
        """The clusters dgm talks to, "default" first: every [clusters.<name>], and the
        default one unless [clusters] are set while [cluster] names no bootstrap servers and
        no pipeline lives on it (a file naming only its own clusters needs no embedded one)."""
        uses_default = (
            not self.clusters
            or self.cluster.bootstrap_servers is not None
            or any(DEFAULT_CLUSTER in (p.source_cluster, p.sink_cluster) for p in self.pipelines)
        )
        named = tuple(sorted(self.clusters))
        return (DEFAULT_CLUSTER, *named) if uses_default else named

    def problems(self) -> Iterator[Problem]:
        yield from _clusters_problems(self)
        first_index: dict[str, int] = {}
        for index, pipeline in enumerate(self.pipelines):
            if pipeline.name in first_index:
                yield (
                    f"pipelines[{index}].name",
                    f"expected a unique name, got {pipeline.name!r} again "
                    f"(first at pipelines[{first_index[pipeline.name]}])",
                )
            first_index.setdefault(pipeline.name, index)
        yield from id_rule_conflicts(self.pipelines)
        yield from sample_conflicts(
            (index, p.name, tuple(t for t, _, _ in p.topic_id_rules()), self.one_in(p))
            for index, p in enumerate(self.pipelines)
        )
        first_rule: dict[str, int] = {}
        for index, rule in enumerate(self.alerts):
            if rule.name in first_rule:
                yield (
                    f"alerts[{index}].name",
                    f"expected a unique rule name, got {rule.name!r} again "
                    f"(first at alerts[{first_rule[rule.name]}])",
                )
            first_rule.setdefault(rule.name, index)
