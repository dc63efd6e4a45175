"""The whole of dgm.toml: every section, and the checks that span sections."""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dgm.config.alerts import AlertRule, AlertWebhook
from dgm.config.analysis import AnalysisSettings
from dgm.config.cluster import ClusterConfig
from dgm.config.collectors import CollectorSettings
from dgm.config.pipelines import PipelineConfig, id_rule_conflicts
from dgm.config.problems import ConfigError, Problem
from dgm.config.services import DashboardSettings, ExporterSettings, WatchSettings
from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.contracts.sampling import KEEP_ALL, sample_conflicts

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
        once, by dgm.config.loader.load_config; the file's text (and append_pipeline) keep plain
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
