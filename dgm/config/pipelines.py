"""[[pipelines]]: what a pipeline declares (source, sink, id rules, claim, expected records)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, get_args

from dgm.config.analysis import duration
from dgm.config.external_sinks import ExternalSink
from dgm.config.problems import Problem, empty_names
from dgm.contracts.clusters import DEFAULT_CLUSTER, SEPARATOR, qualified
from dgm.contracts.sampling import KEEP_ALL

# A Literal so mypy checks the config; its words are dgm.contracts.vocabulary.DECLARABLE, in order
# (tests/dgm/config/test_loader.py holds the two equal).
Semantic = Literal["at-most-once", "at-least-once", "exactly-once"]
SEMANTICS: tuple[str, ...] = get_args(Semantic)
IdKind = Literal["header", "json_field", "registry_field", "key", "hash"]
# The claim kinds: dgm.contracts.vocabulary.ClaimKind's words, in order
# (tests/dgm/config/test_loader.py holds the two equal).
ClaimName = Literal["group", "deadline"]
CLAIMS: tuple[str, ...] = get_args(ClaimName)

# Pipeline names become file and partition names downstream, so keep them path-safe.
_PIPELINE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
# The id kinds whose `name` says where the id is.
NAMED_KINDS = ("header", "json_field", "registry_field")


@dataclass(frozen=True)
class MessageIdRule:
    """How to find a message's id, in DESIGN's order of preference."""

    # header: a record header; json_field: a field of a JSON value; registry_field: a field
    # of a value framed for a schema registry (Avro, JSON Schema; the format is the writer
    # schema's, found per record: docs/design.md, "Records framed for a schema registry");
    # key: the record key; hash: a hash of key and value (for pipelines that carry no id).
    kind: IdKind = "header"
    # The header name for kind=header; a dotted path (order.id) for kind=json_field and
    # registry_field (nested records; for Avro, a step into a map takes its key); ignored
    # otherwise.
    name: str = "dgm-id"

    def same_as(self, other: MessageIdRule) -> bool:
        """Whether both find the same id (the name matters only for the kinds with a name)."""
        return self.kind == other.kind and (self.kind not in NAMED_KINDS or self.name == other.name)

    def problems(self) -> Iterator[Problem]:
        if self.kind == "header" and not self.name:
            yield "name", "expected a header name, got ''"
        if self.kind in ("json_field", "registry_field") and not all(self.name.split(".")):
            yield "name", f"expected a dotted path like 'order.id', got {self.name!r}"


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
    # Optional, under any claim: a duration like "30s", > 0. A checked record whose first sink
    # copy became readable more than this after the record did (its delivery latency,
    # docs/design.md "Late records") is a late record, listed in the late_records table. A
    # deadline claim without one has max_delay, measured on timestamps, as its objective.
    latency_objective: str = ""
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
    # dgm.contracts.clusters): the names every stage and published table use.
    source_cluster: str = DEFAULT_CLUSTER
    sink_cluster: str = DEFAULT_CLUSTER
    # Keep the fingerprints of 1 in this many message ids, chosen by the id's hash, on every
    # side (docs/design.md, "Sampled pipelines"); unset: analysis.sample_one_in. Pipelines
    # that share a topic sample it alike. >= 1.
    sample_one_in: int | None = None
    # The dashboard's duplicate story reads a copy's value back from Kafka on request, decoded
    # (dgm.contracts.record_view); true hides the values of this pipeline's topics instead.
    hide_values: bool = False

    def problems(self) -> Iterator[Problem]:
        if not _PIPELINE_NAME.fullmatch(self.name):
            yield "name", f"expected letters, digits, '.', '_' or '-', got {self.name!r}"
        if not self.source_topics:
            yield "source_topics", "expected at least one topic, got []"
        yield from empty_names("source_topics", self.source_topics)
        yield from empty_names("sink_topics", self.sink_topics)
        yield from _cluster_topic_problems(self)
        yield from self._claim_problems()
        if self.latency_objective:
            try:
                duration(self.latency_objective)
            except ValueError as error:
                yield "latency_objective", str(error)
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
        cluster and its sink topics by its sink cluster (dgm.contracts.clusters; the group is the
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

    def objective(self) -> timedelta | None:
        """latency_objective as a duration; None when unset."""
        return duration(self.latency_objective) if self.latency_objective else None

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
