"""docs/configuration.md lists every key dgm.toml may hold, as dgm/config/ declares
them, with the declared default: a key added, removed or re-defaulted in the schema fails
here until the page says so."""

from __future__ import annotations

import dataclasses
import json
import re
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from dgm.config.document import DgmConfig

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
HEADER = "| key | type | default | meaning |"


def _dataclass_in(hint: Any) -> type | None:
    """The dataclass a field holds (itself, optional, or a tuple of them), else None."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    if get_origin(hint) in (Union, types.UnionType, tuple):
        for arg in get_args(hint):
            found = _dataclass_in(arg)
            if found is not None:
                return found
    return None


def declared_keys(cls: type = DgmConfig, prefix: str = "") -> dict[str, dataclasses.Field[Any]]:
    """Every leaf key of the file ('analysis.grace_s', 'pipelines.message_id.kind'), with its
    field; tables of tables ([[pipelines]], [pipelines.message_id]) are walked into."""
    hints = get_type_hints(cls)
    keys: dict[str, dataclasses.Field[Any]] = {}
    for field in dataclasses.fields(cls):
        if field.metadata.get("toml", True) is False:
            continue
        nested = _dataclass_in(hints[field.name])
        named = get_args(hints[field.name])  # a table of named tables: [clusters.<name>]
        if (
            get_origin(hints[field.name]) is dict
            and isinstance(named[1], type)
            and dataclasses.is_dataclass(named[1])
        ):
            keys.update(declared_keys(named[1], f"{prefix}{field.name}.<name>."))
        elif nested is not None:
            keys.update(declared_keys(nested, f"{prefix}{field.name}."))
        else:
            keys[f"{prefix}{field.name}"] = field
    return keys


def written_default(field: dataclasses.Field[Any]) -> str:
    """The default as the page writes it: TOML syntax, `required` or `unset`."""
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, tuple):
        return "[" + ", ".join(json.dumps(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + "}"
    return repr(value)


def documented_rows(text: str) -> dict[str, list[str]]:
    """key -> its row's cells, from every table whose header is HEADER."""
    rows: dict[str, list[str]] = {}
    in_table = False
    for line in text.splitlines():
        if line.strip() == HEADER:
            in_table = True
            continue
        if in_table and line.startswith("|---"):
            continue
        if in_table and line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            key = re.fullmatch(r"`([^`]+)`", cells[0])
            assert key, f"a key column holds one backticked key, got {cells[0]!r}"
            assert key[1] not in rows, f"{key[1]} is listed twice"
            rows[key[1]] = cells
        else:
            in_table = False
    return rows


def test_every_declared_key_is_documented_and_every_documented_key_declared() -> None:
    declared = set(declared_keys())
    documented = set(documented_rows(PAGE.read_text(encoding="utf-8")))
    assert not declared - documented, f"declared, not in {PAGE.name}: {declared - documented}"
    assert not documented - declared, f"in {PAGE.name}, not declared: {documented - declared}"


def test_documented_defaults_are_the_declared_ones() -> None:
    rows = documented_rows(PAGE.read_text(encoding="utf-8"))
    wrong = {
        key: (rows[key][2], f"`{written_default(field)}`")
        for key, field in declared_keys().items()
        if key in rows  # a missing key is the test above's failure
        and rows[key][2] not in (f"`{written_default(field)}`", written_default(field))
    }
    assert not wrong, f"(documented, declared) defaults differ: {wrong}"


def test_the_walk_finds_nested_tables() -> None:
    keys = declared_keys()
    assert "pipelines.message_id.kind" in keys and "pipelines.external_sink.path" in keys
    assert "alerts_webhook.headers" in keys and "source" not in keys
    assert "clusters.<name>.bootstrap_servers" in keys and "clusters" not in keys
    assert written_default(keys["collectors.include_topics"]) == '[".*"]'
    assert written_default(keys["pipelines.name"]) == "required"
