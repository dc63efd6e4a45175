"""dgm.toml loading, validation, redaction and append_pipeline."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dgm.config.analysis import audit_start
from dgm.config.cluster import ClusterConfig, is_secret_key
from dgm.config.external_sinks import ExternalSink
from dgm.config.loader import append_pipeline, load_config
from dgm.config.pipelines import CLAIMS, SEMANTICS, MessageIdRule, PipelineConfig
from dgm.config.problems import ConfigError
from dgm.contracts.vocabulary import DECLARABLE, ClaimKind
from dgm.util.errors import UserFacingError
from tests.support.config_text import load_text

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "dgm.toml"

PIPELINE = """
[[pipelines]]
name = "orders"
source_topics = ["orders"]
sink_topics = ["orders-out"]
consumer_group = "orders-app"
declared_semantic = "exactly-once"
"""


@pytest.fixture(autouse=True)
def _no_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    # CI may export these for integration tests; here they would change what is loaded.
    monkeypatch.delenv("DGM_STATE_DIR", raising=False)
    monkeypatch.delenv("DGM_BOOTSTRAP", raising=False)
    monkeypatch.delenv("DGM_SPARK_MASTER", raising=False)


def error_for(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_text(tmp_path, text)
    return str(caught.value)


def pipeline(**changes: object) -> PipelineConfig:
    base = PipelineConfig(
        name="orders",
        source_topics=("orders",),
        sink_topics=("orders-out",),
        consumer_group="orders-app",
        declared_semantic="at-least-once",
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


# --- finding the file, defaults, paths, environment -------------------------------------


def test_missing_file_is_a_user_facing_error(tmp_path: Path) -> None:
    with pytest.raises(UserFacingError) as caught:
        load_config("nope.toml", cwd=tmp_path)
    assert str(caught.value) == "config file not found: nope.toml"


def test_no_file_means_defaults_with_state_dir_under_cwd(tmp_path: Path) -> None:
    config = load_config(cwd=tmp_path)
    assert config.source is None
    assert config.state_dir == tmp_path / ".dgm"
    assert config.cluster.bootstrap_servers is None
    assert config.collectors.interval_s == 10.0
    assert config.collectors.exclude_topics == ("^__",)
    assert config.pipelines == ()


def test_dgm_toml_in_cwd_is_found_without_a_path(tmp_path: Path) -> None:
    (tmp_path / "dgm.toml").write_text(PIPELINE, encoding="utf-8")
    config = load_config(cwd=tmp_path)
    assert config.source == tmp_path / "dgm.toml"
    assert config.pipeline("orders").consumer_group == "orders-app"


def test_state_dir_is_relative_to_the_config_file_not_cwd(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "dgm.toml").write_text('state_dir = "state"\n', encoding="utf-8")
    (tmp_path / "other").mkdir()
    config = load_config(tmp_path / "conf" / "dgm.toml", cwd=tmp_path / "other")
    assert config.state_dir == tmp_path / "conf" / "state"
    (tmp_path / "conf" / "dgm.toml").write_text("", encoding="utf-8")
    default = load_config(tmp_path / "conf" / "dgm.toml", cwd=tmp_path / "other")
    assert default.state_dir == tmp_path / "conf" / ".dgm"


def test_external_sink_path_is_relative_to_the_config_file(tmp_path: Path) -> None:
    config = load_text(
        tmp_path,
        PIPELINE + '[pipelines.external_sink]\npath = "db/sink.db"\ntable = "t"\n'
        'id_column = "id"\nkind = "sqlite"\n',
    )
    sink = config.pipeline("orders").external_sink
    assert sink == ExternalSink(tmp_path / "db" / "sink.db", "t", "id", kind="sqlite")


def test_environment_overrides_state_dir_and_bootstrap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dgm.toml").write_text(
        'state_dir = "from-file"\n[cluster]\nbootstrap_servers = "file:9092"\n', encoding="utf-8"
    )
    monkeypatch.setenv("DGM_STATE_DIR", "from-env")
    monkeypatch.setenv("DGM_BOOTSTRAP", "env:9092")
    config = load_config(cwd=tmp_path)
    assert config.state_dir == tmp_path / "from-env"
    assert config.cluster.bootstrap_servers == "env:9092"


def test_environment_overrides_the_spark_master_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file's value, and the default when the file says nothing, both give way to it.
    (tmp_path / "dgm.toml").write_text('[analysis]\nspark_master = "local[2]"\n')
    assert load_config(cwd=tmp_path).analysis.spark_master == "local[2]"
    monkeypatch.setenv("DGM_SPARK_MASTER", "spark://master:7077")
    assert load_config(cwd=tmp_path).analysis.spark_master == "spark://master:7077"
    (tmp_path / "dgm.toml").write_text("")
    assert load_config(cwd=tmp_path).analysis.spark_master == "spark://master:7077"


# --- error messages: file, key path, expected, found ------------------------------------


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    message = error_for(tmp_path, '[cluster]\nbootstrap_server = "b:9092"\n')
    assert message == (
        "dgm.toml: cluster.bootstrap_server: unknown key (did you mean 'bootstrap_servers'?)"
    )


def test_unknown_key_without_a_close_one_lists_the_keys(tmp_path: Path) -> None:
    message = error_for(tmp_path, "[collectors]\nzzz = 1\n")
    assert message.startswith("dgm.toml: collectors.zzz: unknown key (expected one of ")
    assert "interval_s" in message


def test_wrong_type_says_expected_and_found(tmp_path: Path) -> None:
    message = error_for(tmp_path, '[collectors]\ninterval_s = "10s"\n')
    assert message == "dgm.toml: collectors.interval_s: expected a number, got string '10s'"


def test_a_boolean_is_not_a_number(tmp_path: Path) -> None:
    message = error_for(tmp_path, "[collectors]\ninterval_s = true\n")
    assert message == "dgm.toml: collectors.interval_s: expected a number, got boolean true"


def test_dashboard_edits_are_off_unless_a_boolean_says_on(tmp_path: Path) -> None:
    assert load_text(tmp_path, "").dashboard.allow_edits is False
    assert load_text(tmp_path, "[dashboard]\nallow_edits = true\n").dashboard.allow_edits
    message = error_for(tmp_path, '[dashboard]\nallow_edits = "yes"\n')
    assert message == "dgm.toml: dashboard.allow_edits: expected a boolean, got string 'yes'"


def test_unknown_semantic_lists_the_three(tmp_path: Path) -> None:
    text = PIPELINE + PIPELINE.replace('"orders"', '"b"').replace("exactly-once", "exactly-twice")
    assert error_for(tmp_path, text) == (
        "dgm.toml: pipelines[1].declared_semantic: expected one of 'at-most-once', "
        "'at-least-once', 'exactly-once', got 'exactly-twice'"
    )


def test_exporter_granularity_is_partition_or_topic(tmp_path: Path) -> None:
    assert load_text(tmp_path, "").exporter.granularity == "partition"
    assert load_text(tmp_path, '[exporter]\ngranularity = "topic"\n').exporter.granularity == (
        "topic"
    )
    message = error_for(tmp_path, '[exporter]\ngranularity = "broker"\n')
    assert message == (
        "dgm.toml: exporter.granularity: expected one of 'partition', 'topic', got 'broker'"
    )


def test_invalid_toml_names_the_line(tmp_path: Path) -> None:
    message = error_for(tmp_path, '[cluster]\nbootstrap_servers = "a"\nclient = {\n')
    assert message.startswith("dgm.toml: line 3: invalid TOML: ")


def test_invalid_regex_names_the_key(tmp_path: Path) -> None:
    message = error_for(tmp_path, '[collectors]\ninclude_topics = ["^orders", "(unclosed"]\n')
    assert message.startswith(
        "dgm.toml: collectors.include_topics[1]: expected a regex, got '(unclosed'"
    )


def test_interval_must_be_positive(tmp_path: Path) -> None:
    message = error_for(tmp_path, "[collectors]\ninterval_s = 0\n")
    assert message.startswith("dgm.toml: collectors.interval_s: expected a number of seconds > 0")


def test_analysis_start_is_earliest_latest_or_a_duration(tmp_path: Path) -> None:
    assert load_text(tmp_path, "").analysis.start == "earliest"
    assert audit_start(load_text(tmp_path, '[analysis]\nstart = "latest"\n').analysis.start) == (
        "latest"
    )
    assert audit_start("90s") == timedelta(seconds=90)
    assert audit_start("1.5h") == timedelta(minutes=90)
    assert audit_start("7d") == timedelta(days=7)
    message = error_for(tmp_path, '[analysis]\nstart = "yesterday"\n')
    assert message.startswith(
        'dgm.toml: analysis.start: expected "earliest", "latest" or a duration like "30m"'
    )
    assert "'yesterday'" in message
    assert "analysis.start" in error_for(tmp_path, '[analysis]\nstart = "0h"\n')


def test_the_reread_share_is_a_share(tmp_path: Path) -> None:
    assert load_text(tmp_path, "").analysis.reread_share == 0.1
    assert load_text(tmp_path, "[analysis]\nreread_share = 0\n").analysis.reread_share == 0
    message = error_for(tmp_path, "[analysis]\nreread_share = 1.5\n")
    assert message.startswith("dgm.toml: analysis.reread_share: expected a share between 0 and 1")


def test_duplicate_pipeline_names(tmp_path: Path) -> None:
    message = error_for(tmp_path, PIPELINE + PIPELINE)
    assert message == (
        "dgm.toml: pipelines[1].name: expected a unique name, got 'orders' again "
        "(first at pipelines[0])"
    )


def test_missing_required_key(tmp_path: Path) -> None:
    message = error_for(tmp_path, PIPELINE.replace('declared_semantic = "exactly-once"\n', ""))
    assert message == (
        "dgm.toml: pipelines[0].declared_semantic: missing required key (expected one of "
        "'at-most-once', 'at-least-once', 'exactly-once')"
    )


def test_a_group_claim_needs_its_group(tmp_path: Path) -> None:
    message = error_for(tmp_path, PIPELINE.replace('consumer_group = "orders-app"\n', ""))
    assert message == (
        'dgm.toml: pipelines[0].consumer_group: missing required key with claim = "group" '
        '(expected a consumer group id, or claim = "deadline" with a max_delay)'
    )
    blank = error_for(tmp_path, PIPELINE.replace('"orders-app"', '" "'))
    assert blank == "dgm.toml: pipelines[0].consumer_group: expected a consumer group id, got ' '"
    delay = error_for(tmp_path, PIPELINE + 'max_delay = "5m"\n')
    assert delay == 'dgm.toml: pipelines[0].max_delay: only for claim = "deadline"'


DEADLINE = PIPELINE.replace('consumer_group = "orders-app"\n', 'claim = "deadline"\n')


def test_a_latency_objective_under_any_claim_names_its_key_when_wrong(tmp_path: Path) -> None:
    grouped = load_text(tmp_path, PIPELINE + 'latency_objective = "30s"\n').pipelines[0]
    assert grouped.objective() == timedelta(seconds=30)
    timed = DEADLINE + 'max_delay = "5m"\nlatency_objective = "2s"\n'
    assert load_text(tmp_path, timed).pipelines[0].objective() == timedelta(seconds=2)
    assert pipeline().objective() is None
    assert error_for(tmp_path, PIPELINE + 'latency_objective = "soon"\n') == (
        'dgm.toml: pipelines[0].latency_objective: expected a duration > 0 like "30s", "5m", '
        "\"1h\" (s, m, h or d), got 'soon'"
    )


def test_a_deadline_claim_needs_no_group_and_a_max_delay(tmp_path: Path) -> None:
    loaded = load_text(tmp_path, DEADLINE + 'max_delay = "5m"\n').pipelines[0]
    assert (loaded.claim, loaded.consumer_group) == ("deadline", "")
    assert loaded.deadline() == timedelta(minutes=5)
    with_group = load_text(tmp_path, DEADLINE + 'max_delay = "1.5s"\nconsumer_group = "g"\n')
    assert with_group.pipelines[0].deadline() == timedelta(seconds=1.5)
    assert pipeline().deadline() is None
    assert error_for(tmp_path, DEADLINE) == (
        'dgm.toml: pipelines[0].max_delay: missing required key with claim = "deadline" '
        '(expected a duration like "30s", "5m", "1h")'
    )
    for wrong in ("0s", "-5m", "5 minutes", "5"):
        assert error_for(tmp_path, DEADLINE + f'max_delay = "{wrong}"\n') == (
            'dgm.toml: pipelines[0].max_delay: expected a duration > 0 like "30s", "5m", '
            f'"1h" (s, m, h or d), got {wrong!r}'
        )
    assert error_for(tmp_path, PIPELINE + 'claim = "offsets"\n') == (
        "dgm.toml: pipelines[0].claim: expected one of 'group', 'deadline', got 'offsets'"
    )


def test_claim_kinds_are_the_vocabulary_ones() -> None:
    assert tuple(ClaimKind) == CLAIMS


def test_pipeline_needs_a_source_and_a_sink(tmp_path: Path) -> None:
    no_source = PIPELINE.replace('["orders"]', "[]")
    assert error_for(tmp_path, no_source) == (
        "dgm.toml: pipelines[0].source_topics: expected at least one topic, got []"
    )
    no_sink = PIPELINE.replace('sink_topics = ["orders-out"]\n', "")
    assert error_for(tmp_path, no_sink) == (
        "dgm.toml: pipelines[0]: expected sink_topics or an external_sink table, got neither"
    )


def test_pipelines_must_be_an_array_of_tables(tmp_path: Path) -> None:
    message = error_for(tmp_path, PIPELINE.replace("[[pipelines]]", "[pipelines]"))
    assert message == "dgm.toml: pipelines: expected an array of tables, got table"


def test_bootstrap_in_client_settings_is_rejected(tmp_path: Path) -> None:
    message = error_for(tmp_path, '[cluster.client]\nbootstrap.servers = "x:1"\n')
    assert message == (
        "dgm.toml: cluster.client.bootstrap.servers: set cluster.bootstrap_servers instead"
    )


def test_unknown_pipeline_lookup_suggests(tmp_path: Path) -> None:
    config = load_text(tmp_path, PIPELINE)
    with pytest.raises(
        ConfigError, match="unknown pipeline 'order' \\(did you mean 'orders'\\?\\)"
    ):
        config.pipeline("order")


# --- client settings and secrets --------------------------------------------------------

SECRETS = """
[cluster.client]
security.protocol = "SASL_SSL"
sasl.mechanism = "SCRAM-SHA-512"
sasl.username = "dgm"
sasl.password = "hunter2-librdkafka"
[cluster.java_client]
fetch.max.wait.ms = 250
"""


def test_client_settings_flatten_dotted_keys_and_stringify_scalars(tmp_path: Path) -> None:
    config = load_text(
        tmp_path,
        '[cluster.client]\nsecurity.protocol = "SSL"\n"metadata.max.age.ms" = 45000\n'
        "ssl.endpoint.identification.algorithm = 'none'\n",
    )
    assert config.cluster.client == {
        "security.protocol": "SSL",
        "metadata.max.age.ms": "45000",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert config.cluster.librdkafka_config("b:9092") == {
        "bootstrap.servers": "b:9092",
        **config.cluster.client,
    }


def test_repr_and_str_redact_secret_values(tmp_path: Path) -> None:
    config = load_text(tmp_path, SECRETS)
    assert config.cluster.client["sasl.password"] == "hunter2-librdkafka"  # usable as given
    for text in (repr(config), str(config), repr(config.cluster), str(config.cluster)):
        assert "hunter2" not in text
        assert "'sasl.password': '***'" in text
        assert "'security.protocol': 'SASL_SSL'" in text


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("sasl.password", True),
        ("sasl.jaas.config", True),
        ("sasl.oauthbearer.client.secret", True),
        ("sasl.oauthbearer.token.endpoint.url", True),
        ("ssl.key.pem", True),
        ("ssl.keystore.key", True),
        ("SSL.Key.Password", True),
        ("ssl.key.location", False),
        ("sasl.username", False),
        ("security.protocol", False),
    ],
)
def test_secret_keys(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[cluster.client]\nsasl.password = ["hunter2"]\n', "cluster.client.sasl.password"),
        ("[cluster.client]\nsasl.password = 1979-05-27\n", "cluster.client.sasl.password"),
        (
            '[cluster.java_client]\n"fetch.min.bytes" = ["hunter2"]\n',
            "cluster.java_client.fetch.min.bytes",
        ),
        ('[cluster]\nclient = "sasl.password=hunter2"\n', "cluster.client"),
        ('[cluster]\njava_client = ["password=hunter2"]\n', "cluster.java_client"),
    ],
)
def test_errors_name_the_key_never_the_secret(tmp_path: Path, text: str, key: str) -> None:
    message = error_for(tmp_path, text)
    assert message.startswith(f"dgm.toml: {key}: expected ")
    assert "hunter2" not in message
    assert "1979" not in message


# --- append_pipeline --------------------------------------------------------------------


def test_append_creates_the_file_and_loads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dgm.toml"
    sink = ExternalSink(tmp_path / "new" / "sink.duckdb", "rows", "id", source_columns=("src",))
    added = pipeline(
        sink_topics=(), external_sink=sink, message_id=MessageIdRule("json_field", "a.b")
    )
    append_pipeline(path, added)
    assert load_config(path).pipelines == (added,)
    assert 'path = "sink.duckdb"' in path.read_text()  # portable: relative to the file
    assert [p.name for p in path.parent.iterdir()] == ["dgm.toml"]  # no temp file left


def test_append_replaces_by_name_in_place_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    original = (
        "# my monitor\n"
        'state_dir = "s"  # keep me\n\n'
        "[cluster]\n"
        'bootstrap_servers = "b:9092"\n\n'
        "# orders: the first pipeline\n" + PIPELINE + '[pipelines.message_id]\nkind = "key"\n'
        "\n# payments: the second pipeline\n"
        # Its own topics: a topic read with two id rules is a config error.
        + PIPELINE.replace('"orders"', '"payments"')
        .replace('"orders-app"', '"pay"')
        .replace('"orders-out"', '"payments-out"')
    )
    path.write_text(original, encoding="utf-8")
    path.chmod(0o640)  # it may hold credentials: its permissions must survive
    before = load_config(path)

    replacement = pipeline(sink_topics=("orders-v2",), declared_semantic="at-most-once")
    append_pipeline(path, replacement)

    after = load_config(path)
    assert [p.name for p in after.pipelines] == ["orders", "payments"]
    assert after.pipeline("orders") == replacement
    assert after.pipeline("payments") == before.pipeline("payments")
    assert dataclasses.replace(after, pipelines=()) == dataclasses.replace(before, pipelines=())
    text = path.read_text()
    for kept in ("# my monitor", "# keep me", "# orders: the first", "# payments: the second"):
        assert kept in text
    assert 'kind = "key"' not in text  # the old block went, sub-table included
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_append_adds_after_existing_content(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    path.write_text("# only a comment, no newline at the end", encoding="utf-8")
    append_pipeline(path, pipeline(name="a"))
    append_pipeline(path, pipeline(name="b"))
    assert [p.name for p in load_config(path).pipelines] == ["a", "b"]
    text = path.read_text()
    assert text.startswith("# only a comment, no newline at the end\n")
    assert "message_id" not in text  # defaults are left out: the file stays short


def test_appends_from_threads_of_one_process_all_land(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    names = [f"p{n}" for n in range(16)]

    def add(name: str) -> None:
        topics = {"source_topics": (f"{name}-in",), "sink_topics": (f"{name}-out",)}
        append_pipeline(path, pipeline(name=name, consumer_group=name, **topics))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(add, names))
    assert sorted(p.name for p in load_config(path).pipelines) == sorted(names)


def test_append_refuses_an_invalid_pipeline_and_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    path.write_text(PIPELINE, encoding="utf-8")
    with pytest.raises(ConfigError, match="expected sink_topics or an external_sink"):
        append_pipeline(path, pipeline(name="nosink", sink_topics=()))
    assert path.read_text() == PIPELINE


def test_append_refuses_to_edit_an_invalid_file(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    path.write_text("[collectors]\ninterval_s = -1\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"dgm\.toml: collectors\.interval_s: expected a number of seconds > 0"
    ):
        append_pipeline(path, pipeline())
    assert path.read_text() == "[collectors]\ninterval_s = -1\n"


@settings(max_examples=60, deadline=None)
@given(
    # Any string a topic name may be: '/' is the cluster separator (dgm.contracts.clusters),
    # refused.
    topic=st.text(min_size=1).filter(lambda text: text.strip() and "/" not in text),
    id_name=st.text().filter(lambda text: all(text.split("."))),
)
def test_append_round_trips_any_string(
    tmp_path_factory: pytest.TempPathFactory, topic: str, id_name: str
) -> None:
    path = tmp_path_factory.mktemp("roundtrip") / "dgm.toml"
    added = pipeline(source_topics=(topic,), message_id=MessageIdRule("json_field", id_name))
    append_pipeline(path, added)
    assert load_config(path).pipelines == (added,)


# --- ${VAR} interpolation -------------------------------------------------------------------


def test_any_string_value_takes_environment_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_TEST_PASSWORD", "hunter2-env")
    monkeypatch.setenv("DGM_TEST_HOST", "kafka-1")
    config = load_text(
        tmp_path,
        '[cluster]\nbootstrap_servers = "${DGM_TEST_HOST}:9092,${DGM_TEST_HOST}:9093"\n'
        '[cluster.client]\nsecurity.protocol = "SASL_SSL"\nsasl.mechanism = "PLAIN"\n'
        'sasl.username = "dgm"\nsasl.password = "${DGM_TEST_PASSWORD}"\n'
        '[collectors]\ninclude_topics = ["^${DGM_TEST_HOST}-", "$${literal}", "a$$${b}"]\n',
    )
    assert config.cluster.bootstrap_servers == "kafka-1:9092,kafka-1:9093"
    assert config.cluster.client["sasl.password"] == "hunter2-env"
    assert config.collectors.include_topics == ("^kafka-1-", "${literal}", "a$${b}")
    assert "hunter2" not in repr(config)


def test_an_unset_variable_names_the_file_the_key_and_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DGM_TEST_UNSET", raising=False)
    message = error_for(
        tmp_path,
        '[alerts_webhook]\nurl = "https://x/hook"\n'
        '[alerts_webhook.headers]\nAuthorization = "Bearer ${DGM_TEST_UNSET}"\n',
    )
    assert message.startswith("dgm.toml: alerts_webhook.headers.Authorization: ")
    assert "environment variable DGM_TEST_UNSET is not set" in message
    assert "Bearer" not in message  # the value is never echoed
    bad = error_for(tmp_path, 'state_dir = "${not a name}"\n')
    assert bad.startswith("dgm.toml: state_dir: expected ${NAME}")


def test_an_appended_pipeline_keeps_a_literal_dollar_brace(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    added = pipeline(source_topics=("odd${topic}",))
    append_pipeline(path, added)
    assert "$${topic}" in path.read_text()
    assert load_config(path).pipelines == (added,)


# --- Spark's Java client settings -------------------------------------------------------------


def test_java_client_is_derived_for_scram_with_a_pem_ca(tmp_path: Path) -> None:
    config = load_text(
        tmp_path,
        '[cluster.client]\nsecurity.protocol = "sasl_ssl"\nsasl.mechanism = "SCRAM-SHA-512"\n'
        'sasl.username = "dgm"\nsasl.password = \'pa"ss\\word\'\n'
        'ssl.ca.location = "/etc/ca.pem"\n',
    )
    assert config.cluster.java_client == {}  # as written
    assert config.cluster.spark_client() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="dgm" password="pa\\"ss\\\\word";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem",
    }


def test_java_client_adds_fetch_tuning_to_the_translation(tmp_path: Path) -> None:
    config = load_text(tmp_path, SECRETS)
    spark = config.cluster.spark_client()
    assert spark["fetch.max.wait.ms"] == "250"
    assert spark["sasl.mechanism"] == "SCRAM-SHA-512"
    assert 'password="hunter2-librdkafka"' in spark["sasl.jaas.config"]


@pytest.mark.parametrize(
    ("client", "key", "why"),
    [
        (
            'security.protocol = "SASL_SSL"\nsasl.mechanism = "GSSAPI"\n',
            "sasl.mechanism",
            "kafka-python authenticates with Kerberos only",
        ),
        (
            'security.protocol = "SASL_PLAINTEXT"\nsasl.mechanism = "OAUTHBEARER"\n'
            'sasl.oauthbearer.config = "principal=hunter2"\n',
            "sasl.oauthbearer.config",
            "kafka-python has no unsecured token provider",
        ),
        (
            'security.protocol = "SASL_SSL"\nsasl.mechanism = "PLAIN"\n',
            "sasl.mechanism",
            "needs sasl.username and sasl.password",
        ),
        (
            'security.protocol = "SSL"\n"ssl.key.pem" = "-----BEGIN PRIVATE KEY-----hunter2"\n',
            "ssl.key.pem",
            "kafka-python takes a key file only",
        ),
        (
            'security.protocol = "SSL"\nssl.crl.location = "/etc/crl.pem"\n',
            "ssl.crl.location",
            "Spark's Java Kafka client has no certificate revocation list setting",
        ),
        (
            '"session.timeout.ms" = 45000\n',
            "session.timeout.ms",
            "kafka-python and Spark's Java Kafka client cannot be given it",
        ),
    ],
)
def test_a_setting_one_client_cannot_take_is_refused_naming_key_and_client(
    tmp_path: Path, client: str, key: str, why: str
) -> None:
    message = error_for(tmp_path, f"[cluster.client]\n{client}")
    assert message.startswith(f"dgm.toml: cluster.client.{key}: ")
    assert why in message
    assert "hunter2" not in message


@pytest.mark.parametrize(
    "setting", ['sasl.jaas.config = "x"', 'ssl.truststore.location = "/t.jks"', 'client.id = "x"']
)
def test_connection_settings_in_java_client_are_refused(tmp_path: Path, setting: str) -> None:
    key = setting.split(" ", 1)[0]
    message = error_for(tmp_path, f"[cluster.java_client]\n{setting}\n")
    assert message.startswith(f"dgm.toml: cluster.java_client.{key}: only Spark's fetch tuning")
    assert "[cluster.client]" in message


def test_plaintext_gives_spark_only_what_was_set(tmp_path: Path) -> None:
    assert load_text(tmp_path, "").cluster.spark_client() == {}
    config = load_text(tmp_path, '[cluster.client]\n"client.id" = "dgm"\n')
    assert config.cluster.spark_client() == {"client.id": "dgm"}  # it reaches Spark too


# --- the example and the public constants -------------------------------------------------


EXAMPLE_ENV = {
    "KAFKA_PASSWORD": "hunter2-kafka",
    "TRUSTSTORE_PASSWORD": "hunter2-truststore",
    "ALERTMANAGER_TOKEN": "hunter2-token",
    "POSTGRES_PASSWORD": "hunter2-postgres",
}


def test_example_config_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in EXAMPLE_ENV.items():
        monkeypatch.setenv(name, value)
    config = load_config(EXAMPLE)
    assert config.cluster.client["security.protocol"] == "SASL_SSL"
    assert config.cluster.client["sasl.password"] == "hunter2-kafka"
    assert 'password="hunter2-kafka"' in config.cluster.spark_client()["sasl.jaas.config"]
    assert {p.message_id.kind for p in config.pipelines} == {"header", "json_field"}
    assert any(p.external_sink is not None for p in config.pipelines)
    (postgres,) = (p.external_sink for p in config.pipelines if p.name == "orders-to-postgres")
    assert postgres is not None and postgres.kind == "postgresql"
    assert postgres.password == "hunter2-postgres"
    assert config.analysis.interval_s == 10 and config.analysis.start == "earliest"
    assert [rule.name for rule in config.alerts] == [
        "orders-duplicates",
        "lso-stuck",
        "analysis-stalled",
    ]
    mirror = config.pipeline("orders-mirror")
    assert mirror.sink_topics == ("backup/primary.orders",) and mirror.source_topics == ("orders",)
    assert config.clusters["backup"].client["sasl.password"] == "hunter2-kafka"
    assert config.alerts_webhook.format == "alertmanager"
    assert config.alerts_webhook.headers == {"Authorization": "Bearer hunter2-token"}
    assert config.exporter.granularity == "topic"
    assert config.dashboard.allow_edits is False
    assert "hunter2" not in repr(config)


def test_readme_toml_examples_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ```toml block of README.md and docs/configuration.md is a dgm.toml that loads
    (with its ${VAR}s set)."""
    blocks = []
    for page in ("README.md", "docs/configuration.md"):
        text = (EXAMPLE.parents[1] / page).read_text(encoding="utf-8")
        found = re.findall(r"```toml\n(.*?)```", text, flags=re.DOTALL)
        assert found, f"{page} shows no dgm.toml"
        blocks.extend(found)
    for index, block in enumerate(blocks):
        for name in re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", block):
            monkeypatch.setenv(name, "set-by-the-test")
        (tmp_path / f"readme-{index}.toml").write_text(block, encoding="utf-8")
        load_config(tmp_path / f"readme-{index}.toml")


def test_example_config_names_a_missing_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in EXAMPLE_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ALERTMANAGER_TOKEN")
    with pytest.raises(ConfigError) as caught:
        load_config(EXAMPLE)
    assert str(caught.value) == (
        f"{EXAMPLE}: alerts_webhook.headers.Authorization: environment variable "
        "ALERTMANAGER_TOKEN is not set (the value says ${ALERTMANAGER_TOKEN}; write $${ for a "
        "literal '${')"
    )


def test_semantics_in_order() -> None:
    assert SEMANTICS == ("at-most-once", "at-least-once", "exactly-once")


def test_declarable_semantics_are_the_vocabulary_ones() -> None:
    # The config's Literal spells the words for mypy; the vocabulary is where they are defined.
    assert tuple(DECLARABLE) == SEMANTICS


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ClusterConfig().bootstrap_servers = "x"  # type: ignore[misc]


# --- the generic loader, for types the schema does not use yet --------------------------


@dataclasses.dataclass(frozen=True)
class _Knob:
    retries: int = 3
    enabled: bool = False
    mode: Literal["a", "b"] = "a"


def test_generic_loader_rejects_a_boolean_for_an_int(tmp_path: Path) -> None:
    from dgm.config.loader import _At, _load_table

    at = _At("x.toml", tmp_path, "knob")
    assert _load_table(_Knob, {"retries": 5, "enabled": True}, at) == _Knob(5, True)
    cases: list[tuple[dict[str, object], str]] = [
        ({"retries": True}, "knob.retries: expected an integer, got boolean true"),
        ({"retries": 1.5}, "knob.retries: expected an integer, got float 1.5"),
        ({"enabled": 1}, "knob.enabled: expected a boolean, got integer 1"),
        ({"mode": "c"}, "knob.mode: expected one of 'a', 'b', got 'c'"),
    ]
    for table, message in cases:
        with pytest.raises(ConfigError) as caught:
            _load_table(_Knob, table, at)
        assert str(caught.value) == f"x.toml: {message}"


def test_per_side_id_rules_and_expected_load_and_conflicts_name_both_pipelines(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dgm.toml"
    rekeying = (
        PIPELINE + "expected = \"get_json_object(CAST(value AS STRING), '$.n') % 10 != 0\"\n"
        '[pipelines.source_message_id]\nkind = "json_field"\nname = "id"\n'
        '[pipelines.sink_message_id]\nkind = "key"\n'
    )
    path.write_text(rekeying, encoding="utf-8")
    loaded = load_config(path).pipeline("orders")
    assert loaded.source_id_rule() == MessageIdRule("json_field", "id")
    assert loaded.sink_id_rule().kind == "key"
    assert loaded.message_id == MessageIdRule()
    # A second pipeline reading the sink with the default (header) rule: one topic, two rules.
    downstream = (
        PIPELINE.replace('"orders"', '"audit"')
        .replace('source_topics = ["audit"]', 'source_topics = ["orders-out"]')
        .replace('"orders-out"]\nconsumer', '"audit-out"]\nconsumer')
    )
    path.write_text(rekeying + downstream, encoding="utf-8")
    with pytest.raises(
        ConfigError,
        match=r"pipelines\[1\]\.message_id: topic 'orders-out'.*"
        r"pipeline 'orders' sink_message_id says key.*pipeline 'audit' message_id",
    ):
        load_config(path)
    path.write_text(PIPELINE + 'expected = "(n > 1"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"pipelines\[0\]\.expected: unbalanced '\('"):
        load_config(path)
