"""[clusters.<name>] in dgm.toml, pipelines' source_cluster/sink_cluster, and the qualified
names ('<cluster>/<name>') every stage works with (dgm/contracts/clusters.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import PipelineConfig
from dgm.config.problems import ConfigError
from dgm.contracts.clusters import DEFAULT_CLUSTER, cluster_column, cluster_of, qualified, split

TWO = """
[cluster]
bootstrap_servers = "a:9092"

[clusters.west]
bootstrap_servers = "w1:9092,w2:9092"
[clusters.west.client]
security.protocol = "SASL_SSL"
sasl.mechanism = "SCRAM-SHA-512"
sasl.username = "dgm"
sasl.password = "secret"
"""
MIRROR = """
[[pipelines]]
name = "mm2"
source_topics = ["orders"]
sink_topics = ["a.orders"]
sink_cluster = "west"
declared_semantic = "at-least-once"
claim = "deadline"
max_delay = "5m"
"""


def config_at(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dgm.toml"
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(config_at(tmp_path, text))
    return str(caught.value)


def test_a_named_cluster_has_its_own_settings_and_its_topics_are_qualified(
    tmp_path: Path,
) -> None:
    config = load_config(config_at(tmp_path, TWO + MIRROR))
    west = config.cluster_config("west")
    assert west.bootstrap_servers == "w1:9092,w2:9092"
    assert west.client["sasl.username"] == "dgm" and config.cluster.client == {}
    assert west.spark_client()["sasl.mechanism"] == "SCRAM-SHA-512"  # derived per cluster
    assert "secret" not in repr(config)
    assert config.cluster_config(DEFAULT_CLUSTER) is config.cluster
    assert config.sampled_clusters() == ("default", "west")
    mm2 = config.pipeline("mm2")
    assert (mm2.source_cluster, mm2.sink_cluster) == ("default", "west")
    assert mm2.source_topics == ("orders",) and mm2.sink_topics == ("west/a.orders",)
    assert mm2.sink_names() == ("west/a.orders",)


def test_a_group_lives_on_the_source_cluster(tmp_path: Path) -> None:
    text = TWO + MIRROR.replace('sink_cluster = "west"', 'source_cluster = "west"').replace(
        'claim = "deadline"\nmax_delay = "5m"', 'consumer_group = "mirror"'
    )
    pipeline = load_config(config_at(tmp_path, text)).pipeline("mm2")
    assert pipeline.source_topics == ("west/orders",) and pipeline.sink_topics == ("a.orders",)
    assert pipeline.consumer_group == "west/mirror"


def test_a_single_cluster_file_reads_as_before(tmp_path: Path) -> None:
    text = '[cluster]\nbootstrap_servers = "a:9092"\n' + MIRROR.replace(
        'sink_cluster = "west"\n', ""
    )
    config = load_config(config_at(tmp_path, text))
    assert config.clusters == {} and config.sampled_clusters() == ("default",)
    assert config.pipeline("mm2").sink_topics == ("a.orders",)


def test_only_named_clusters_need_no_default_one(tmp_path: Path) -> None:
    text = (
        '[clusters.east]\nbootstrap_servers = "e:9092"\n'
        '[clusters.west]\nbootstrap_servers = "w:9092"\n'
        + MIRROR.replace('sink_cluster = "west"', 'source_cluster = "east"\nsink_cluster = "west"')
    )
    config = load_config(config_at(tmp_path, text))
    assert config.sampled_clusters() == ("east", "west")
    assert config.pipeline("mm2").source_topics == ("east/orders",)


def test_dgm_bootstrap_replaces_the_default_cluster_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_BOOTSTRAP", "elsewhere:9092")
    config = load_config(config_at(tmp_path, TWO))
    assert config.cluster.bootstrap_servers == "elsewhere:9092"
    assert config.clusters["west"].bootstrap_servers == "w1:9092,w2:9092"


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        (TWO + MIRROR.replace('"west"', '"wets"'), "pipelines[0].sink_cluster",
         "unknown cluster 'wets' (did you mean 'west'?"),
        (TWO + MIRROR.replace('sink_cluster = "west"', 'source_cluster = "east"'),
         "pipelines[0].source_cluster", "unknown cluster 'east'"),
        ('[clusters.west]\nclient = {}\n', "clusters.west.bootstrap_servers",
         "missing required key"),
        ('[clusters.default]\nbootstrap_servers = "d:1"\n', "clusters.default",
         "the default cluster is [cluster]"),
        ('[clusters."a/b"]\nbootstrap_servers = "d:1"\n', "clusters.a/b",
         "expected letters, digits"),
        ('[clusters.west]\nbootstrap_servers = ""\n', "clusters.west.bootstrap_servers",
         "expected host:port"),
        (TWO + MIRROR.replace('["a.orders"]', '["west/a.orders"]'), "pipelines[0].sink_topics[0]",
         "name the topic's cluster with sink_cluster"),
        ("clusters = 3\n", "clusters", "expected a table, got integer"),
    ],
)  # fmt: skip
def test_errors_name_the_file_and_the_key(tmp_path: Path, text: str, key: str, words: str) -> None:
    message = error_of(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'dgm.toml'}: {key}: "), message
    assert words in message


def test_append_pipeline_writes_plain_names_and_the_cluster(tmp_path: Path) -> None:
    path = config_at(tmp_path, TWO)
    pipeline = PipelineConfig(
        name="mm2", source_topics=("orders",), sink_topics=("a.orders",), sink_cluster="west",
        declared_semantic="at-least-once", claim="deadline", max_delay="5m",
    )  # fmt: skip
    append_pipeline(path, pipeline)
    assert 'sink_topics = ["a.orders"]' in path.read_text()
    assert 'sink_cluster = "west"' in path.read_text()
    assert load_config(path).pipeline("mm2").sink_topics == ("west/a.orders",)


def test_qualified_names_and_their_cluster() -> None:
    named = {"west", "east"}
    assert qualified("default", "orders") == "orders"
    assert qualified("west", "orders") == "west/orders"
    assert split("west/orders", named) == ("west", "orders")
    assert split("orders", named) == ("default", "orders")
    # A default-cluster group id holding '/' is not taken for a cluster it does not name.
    assert split("team/app", named) == ("default", "team/app")
    assert split("default/x", named | {"default"}) == ("default", "default/x")
    assert cluster_of("east/t", named) == "east" and cluster_of("t", named) == "default"
    assert cluster_of("external:p:table", named) is None and cluster_of(None, named) is None
    column = pa.chunked_array([["t", "west/t", None], ["east/u", "t"]])
    assert cluster_column(column, named).to_pylist() == [
        "default", "west", None, "east", "default"
    ]  # fmt: skip


def test_one_topic_name_on_two_clusters_may_have_two_id_rules(tmp_path: Path) -> None:
    # The source "orders" (ids in a header) and the replica "orders" on west (ids in the key)
    # are two topics; the same name with two rules on one cluster is still refused.
    renamed = MIRROR.replace('sink_topics = ["a.orders"]', 'sink_topics = ["orders"]')
    per_side = renamed + '[pipelines.sink_message_id]\nkind = "key"\n'
    config = load_config(config_at(tmp_path, TWO + per_side))
    assert config.pipelines[0].sink_topics == ("west/orders",)
    same_cluster = per_side.replace('sink_cluster = "west"\n', "")
    assert "two message id rules" in error_of(tmp_path, TWO + same_cluster)
