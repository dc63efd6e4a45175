"""The read-only JSON API: `GET /api/v1/...` answered from the published analysis.

    /api/v1/verdicts                           what `dgm verdicts --json` prints (with the
                                               same age_s and stale)
    /api/v1/pipelines/{name}?limit=N           its verdict, newest windows and faults
    /api/v1/topics/{topic}/duplicates?limit=N&since=T   rows of the duplicates table

Each request opens the publication once (read-only) and closes it. Errors are JSON
`{"error": ...}` with 400 (bad parameter), 404 (unknown path, pipeline or topic) or 503
(nothing published yet, or it cannot be read).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

import duckdb

from dgm.contracts.published import (
    DUPLICATES,
    FAULTS,
    PIPELINE_WINDOWS,
    open_read_only,
    published_path,
    read_verdicts,
    run_duration_s,
    stale_after_s,
    verdicts_document,
)
from dgm.contracts.published_views import read_missing_capabilities, read_missing_permissions

PREFIX = "/api/v1/"
WINDOWS_LIMIT, MAX_WINDOWS = 60, 10_000
DUPLICATES_LIMIT, MAX_DUPLICATES = 100, 100_000
Document = dict[str, Any]
Connection = duckdb.DuckDBPyConnection


class ApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def encode(document: Document) -> bytes:
    """As `dgm verdicts --json` encodes: times and other non-JSON values as str()."""
    return json.dumps(document, default=str).encode()


def answer(
    state_dir: Path, path: str, query: str, interval_s: float = 10.0
) -> tuple[int, Document]:
    """(HTTP status, JSON document) for a GET of `path` with `query` (without the '?');
    `interval_s`: analysis.interval_s, which says when the publication is stale
    (dgm.contracts.published.stale_after_s)."""
    try:
        route, arguments = _route(path)
        params = _params(query)
        return 200, _read(state_dir, lambda db: route(db, params, interval_s, *arguments))
    except ApiError as error:
        return error.status, {"error": str(error)}


def _route(path: str) -> tuple[Callable[..., Document], list[str]]:
    parts = (
        [unquote(p) for p in path.removeprefix(PREFIX).split("/")]
        if path.startswith(PREFIX)
        else []
    )
    if parts == ["verdicts"]:
        return _verdicts, []
    if len(parts) == 2 and parts[0] == "pipelines" and parts[1]:
        return _pipeline, parts[1:]
    if len(parts) == 3 and parts[0] == "topics" and parts[1] and parts[2] == "duplicates":
        return _duplicates, parts[1:2]
    raise ApiError(404, f"no such endpoint: {path}")


def _params(query: str) -> dict[str, str]:
    try:
        parsed = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ApiError(400, f"cannot parse the query string {query!r}") from None
    repeated = sorted(name for name, values in parsed.items() if len(values) > 1)
    if repeated:
        raise ApiError(400, f"parameter given more than once: {', '.join(repeated)}")
    return {name: values[0] for name, values in parsed.items()}


def _read(state_dir: Path, reader: Callable[[Connection], Document]) -> Document:
    path = published_path(state_dir)
    try:
        db = open_read_only(path)
    except FileNotFoundError:
        raise ApiError(503, f"no analysis published yet ({path} does not exist)") from None
    except (duckdb.Error, OSError) as error:
        raise ApiError(503, f"cannot read {path}: {error}") from None
    with db:
        return reader(db)


def _only(params: dict[str, str], *allowed: str) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        accepted = ", ".join(allowed) or "none"
        raise ApiError(400, f"unknown parameter {', '.join(unknown)} (accepted: {accepted})")


def limit(params: dict[str, str], default: int, maximum: int) -> int:
    text = params.get("limit")
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ApiError(400, f"limit: expected an integer, got {text!r}") from None
    if not 1 <= value <= maximum:
        raise ApiError(400, f"limit: expected 1..{maximum}, got {value}")
    return value


def since(params: dict[str, str]) -> datetime | None:
    """An ISO 8601 time; without an offset, UTC."""
    text = params.get("since")
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ApiError(
            400, f"since: expected an ISO 8601 time like 2026-01-31T12:00:00Z, got {text!r}"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _records(db: Connection, sql: str, args: list[Any]) -> list[Document]:
    cursor = db.execute(sql, args)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _columns(names: tuple[str, ...]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _verdicts(db: Connection, params: dict[str, str], interval_s: float) -> Document:
    _only(params)
    rows, finished = read_verdicts(db)
    stale_after = stale_after_s(interval_s, run_duration_s(db))
    missing = read_missing_permissions(db)
    gaps = read_missing_capabilities(db)
    return verdicts_document(rows, finished, stale_after, datetime.now(UTC), missing, gaps)


def _pipeline(db: Connection, params: dict[str, str], interval_s: float, name: str) -> Document:
    _only(params, "limit")
    count = limit(params, WINDOWS_LIMIT, MAX_WINDOWS)
    rows, finished = read_verdicts(db)
    verdict = next((row for row in rows if row["pipeline"] == name), None)
    if verdict is None:
        known = ", ".join(row["pipeline"] for row in rows) or "none"
        raise ApiError(404, f"no pipeline {name!r} in the published analysis (known: {known})")
    windows = _records(
        db,
        f"SELECT {_columns(PIPELINE_WINDOWS.names)} FROM pipeline_windows WHERE pipeline = ? "
        "ORDER BY window_start DESC LIMIT ?",
        [name, count],
    )
    faults = _records(
        db,
        f"SELECT {_columns(FAULTS.names)} FROM faults WHERE pipeline = ? "
        'ORDER BY "at" DESC LIMIT ?',
        [name, count],
    )
    return {"analyzed_at": finished, "verdict": verdict, "windows": windows, "faults": faults}


def _duplicates(db: Connection, params: dict[str, str], interval_s: float, topic: str) -> Document:
    _only(params, "limit", "since")
    count = limit(params, DUPLICATES_LIMIT, MAX_DUPLICATES)
    after = since(params)
    known = db.execute(
        "SELECT EXISTS (SELECT 1 FROM topic_windows WHERE topic = ?) "
        "OR EXISTS (SELECT 1 FROM duplicates WHERE topic = ?)",
        [topic, topic],
    ).fetchone()
    if not (known and known[0]):
        raise ApiError(404, f"no topic {topic!r} in the published analysis")
    rows = _records(
        db,
        f"SELECT {_columns(DUPLICATES.names)} FROM duplicates "
        'WHERE topic = ? AND (?::TIMESTAMPTZ IS NULL OR "timestamp" >= ?::TIMESTAMPTZ) '
        'ORDER BY "timestamp" DESC, "partition", "offset" LIMIT ?',
        [topic, after, after, count],
    )
    finished = db.execute("SELECT max(finished_at) FROM runs").fetchone()
    return {
        "analyzed_at": finished[0] if finished else None,
        "topic": topic,
        "duplicates": rows,
    }
