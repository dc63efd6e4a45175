"""External sinks in PostgreSQL or another JDBC database: keys, validation, secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from dgm.config.loader import load_config
from dgm.config.problems import ConfigError

PIPELINE = (
    '[[pipelines]]\nname = "orders"\nsource_topics = ["o"]\nconsumer_group = "g"\n'
    'declared_semantic = "exactly-once"\n[pipelines.external_sink]\ntable = "t"\n'
    'id_column = "id"\n'
)
POSTGRES = 'kind = "postgresql"\nurl = "jdbc:postgresql://127.0.0.1/db"\n'


def load(tmp_path: Path, text: str) -> object:
    (tmp_path / "dgm.toml").write_text(text, encoding="utf-8")
    return load_config(tmp_path / "dgm.toml")


def test_a_postgresql_sink_with_its_password_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PG_PASSWORD", "hunter2")
    config = load(
        tmp_path,
        PIPELINE + POSTGRES + 'incremental_column = "row_id"\nuser = "dgm"\n'
        'password = "${PG_PASSWORD}"\n',
    )
    sink = config.pipeline("orders").external_sink  # type: ignore[attr-defined]
    assert (sink.kind, sink.path, sink.password) == ("postgresql", None, "hunter2")
    assert sink.jdbc_driver() == ("org.postgresql.Driver", "org.postgresql:postgresql:42.7.10")
    assert "hunter2" not in repr(sink) and "hunter2" not in repr(config)


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        (PIPELINE + POSTGRES, "incremental_column", "missing required key"),
        (PIPELINE + 'kind = "postgresql"\nincremental_column = "n"\n', "url", "missing"),
        (
            PIPELINE + 'kind = "postgresql"\nurl = "jdbc:mysql://h/d"\nincremental_column = "n"\n',
            "url",
            "jdbc:postgresql:",
        ),
        (
            PIPELINE
            + POSTGRES.replace("/db", "/db?password=hunter2")
            + 'incremental_column = "n"\n',
            "url",
            "external_sink.password",
        ),
        (
            PIPELINE + 'kind = "jdbc"\nurl = "jdbc:h2:mem:x"\nincremental_column = "n"\n',
            "driver",
            "driver class",
        ),
        (PIPELINE + 'kind = "duckdb"\n', "path", "missing required key"),
        (PIPELINE + 'path = "x.db"\nincremental_column = "n"\n', "incremental_column", "only"),
        (PIPELINE + 'path = "x.db"\n' + POSTGRES + 'incremental_column = "n"\n', "path", "only"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, key: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, text)
    message = str(raised.value)
    assert f"pipelines[0].external_sink.{key}:" in message and says in message, message
    assert "hunter2" not in message


def test_a_file_sink_loads_as_before(tmp_path: Path) -> None:
    config = load(tmp_path, PIPELINE + 'path = "x.db"\nkind = "sqlite"\n')
    sink = config.pipeline("orders").external_sink  # type: ignore[attr-defined]
    assert (sink.path, sink.kind, sink.url) == (tmp_path / "x.db", "sqlite", "")
