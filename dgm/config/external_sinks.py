"""[pipelines.external_sink]: a pipeline's sink that is a database table, not a topic."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

from dgm.config.problems import Problem, empty_names

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
        yield from empty_names("source_columns", self.source_columns)
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
