"""Where a registry_field rule's dotted path leads in an Avro writer schema, as a small tree
both readers walk: the watch over fastavro's decoded record (watch/registry_ids.py), the
audit over Spark's from_avro struct (spark_jobs/audit/registry_columns.py). One place decides
which Avro values are ids (docs/design.md, "Records framed for a schema registry"):

- string (uuid too), int and long without a logical type, bytes and fixed: ids; bytes,
  fixed and strings read as a key does (UTF-8 as it is, else 0x<HEX>);
- decimal of scale 0 and precision <= 38 (Spark's widest): its integer text;
- enum, boolean, float, double, array, map, record, null, any other logical type (dates,
  times, durations, fractional or wider decimals): no id;
- a union: the branch the record holds decides; null is no id (field missing).

`decoding_schema` also returns the schema text both readers decode with: references
inlined (Spark takes one self-contained schema), and every logical type dropped except the
decimal the path ends on, so no other field's conversion (a malformed uuid, a date out of
range, a decimal wider than its precision) can make one reader refuse a record the other
reads.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Literal

from dgm.contracts.registered_schemas import RegisteredSchema

IdType = Literal["text", "bytes", "integer", "decimal"]
PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_NAMED = ("record", "error", "enum", "fixed")
MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True)
class Leaf:
    """The path's end: an id of `id_type`, or no id (None)."""

    id_type: IdType | None
    precision: int = 0  # a decimal's


@dataclass(frozen=True)
class Missing:
    """The schema has no field at this step: every record of it lacks the id."""


@dataclass(frozen=True)
class Field:
    """Step into a record's field (`map_key` False) or a map's value under a key (True)."""

    name: str
    child: Node
    map_key: bool = False


@dataclass(frozen=True)
class Branch:
    """One non-null branch of a union: `avro_type` is a named type's full name or the type
    name (fastavro's tuple or Python type tells which the record holds), `index` its place
    among the non-null branches (Spark's member<index>)."""

    avro_type: str
    index: int
    child: Node


@dataclass(frozen=True)
class Union:
    branches: tuple[Branch, ...]


Node = Leaf | Missing | Field | Union


class SchemaUnreadable(ValueError):
    """A schema text no reader can decode with: not Avro JSON, an unknown name, recursion
    (Spark's from_avro refuses recursive records)."""


@dataclass(frozen=True)
class AvroPath:
    node: Node
    decoding_text: str  # the self-contained schema both readers decode with
    # The root record's fields. Spark's PERMISSIVE from_avro reads a malformed payload as a
    # record of nulls, so both readers take a record whose every field is null as unreadable
    # (it holds no id either way).
    fields: tuple[str, ...] = ()


def avro_path(schema: RegisteredSchema, dotted: str) -> AvroPath:
    """The tree for `dotted` in `schema`, and the schema to decode with; SchemaUnreadable
    when the schema cannot be read."""
    try:
        root = json.loads(schema.text)
    except ValueError as error:
        raise SchemaUnreadable(f"not JSON: {error}") from error
    definitions: dict[str, Any] = {}
    for reference in _all_references(schema):
        try:
            _collect(json.loads(reference.text), "", definitions)
        except (ValueError, TypeError, KeyError) as error:
            raise SchemaUnreadable(f"reference unreadable: {error}") from error
    try:
        inlined = _inline(root, "", definitions, set())
        names: dict[str, Any] = {}
        _collect(inlined, "", names)
        _check_recursion(inlined, "", names, ())
        leaves: list[Any] = []
        node = _walk(inlined, "", names, tuple(dotted.split(".")), leaves)
    except (TypeError, KeyError, AttributeError) as error:
        raise SchemaUnreadable(f"not an Avro schema: {error!r}") from error
    _strip_logical_types(inlined, {id(leaf) for leaf in leaves})
    root_type, _ = _definition(inlined, "", names)
    fields = ()
    if isinstance(root_type, dict) and root_type.get("type") in ("record", "error"):
        fields = tuple(field["name"] for field in root_type["fields"])
    return AvroPath(node, json.dumps(inlined, separators=(",", ":")), fields)


def _all_references(schema: RegisteredSchema) -> list[RegisteredSchema]:
    found: list[RegisteredSchema] = []
    for reference in schema.references:
        found.extend(_all_references(reference))
        found.append(reference)
    return found


def _full_name(schema: dict[str, Any], namespace: str) -> tuple[str, str]:
    """(full name, namespace for the types inside) of a named type."""
    name = schema["name"]
    if "." in name:
        return name, name.rpartition(".")[0]
    space = schema.get("namespace", namespace) or ""
    return (f"{space}.{name}" if space else name), space


def _resolve(name: str, namespace: str, names: dict[str, Any]) -> str:
    for candidate in (f"{namespace}.{name}" if namespace else name, name):
        if candidate in names:
            return candidate
    raise SchemaUnreadable(f"unknown type {name!r}")


def _collect(schema: Any, namespace: str, names: dict[str, Any]) -> None:
    """Every named type defined in `schema`, by full name."""
    if isinstance(schema, list):
        for branch in schema:
            _collect(branch, namespace, names)
    elif isinstance(schema, dict):
        kind = schema["type"]
        if kind in _NAMED:
            full, namespace = _full_name(schema, namespace)
            names.setdefault(full, schema)
        if kind in ("record", "error"):
            for field in schema["fields"]:
                _collect(field["type"], namespace, names)
        elif kind == "array":
            _collect(schema["items"], namespace, names)
        elif kind == "map":
            _collect(schema["values"], namespace, names)
        elif not isinstance(kind, str):
            _collect(kind, namespace, names)


def _inline(schema: Any, namespace: str, definitions: dict[str, Any], defined: set[str]) -> Any:
    """`schema` with each reference's named type written out at its first use."""
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return schema
        for candidate in (f"{namespace}.{schema}" if namespace else schema, schema):
            if candidate in defined:
                return candidate
            if candidate in definitions:
                defined.add(candidate)
                space = candidate.rpartition(".")[0]
                body = copy.deepcopy(definitions[candidate])
                body.pop("namespace", None)
                body["name"] = candidate
                return _inline_body(body, space, definitions, defined)
        return schema  # a name defined later in this schema, or unknown: _walk says
    if isinstance(schema, list):
        return [_inline(branch, namespace, definitions, defined) for branch in schema]
    if not isinstance(schema, dict):
        raise SchemaUnreadable(f"not an Avro type: {schema!r}")
    if schema.get("type") in _NAMED:
        # Written with its full name and no namespace: a type means the same wherever the
        # walk meets it, and both decoders read full names alike.
        full, inner = _full_name(schema, namespace)
        defined.add(full)
        body = {k: v for k, v in schema.items() if k != "namespace"}
        body["name"] = full
        return _inline_body(body, inner, definitions, defined)
    return _inline_body(dict(schema), namespace, definitions, defined)


def _inline_body(
    schema: dict[str, Any], namespace: str, definitions: dict[str, Any], defined: set[str]
) -> Any:
    kind = schema["type"]
    if kind in ("record", "error"):
        schema["fields"] = [
            {**f, "type": _inline(f["type"], namespace, definitions, defined)}
            for f in schema["fields"]
        ]
    elif kind == "array":
        schema["items"] = _inline(schema["items"], namespace, definitions, defined)
    elif kind == "map":
        schema["values"] = _inline(schema["values"], namespace, definitions, defined)
    elif not isinstance(kind, str) or kind not in (*PRIMITIVES, *_NAMED):
        schema["type"] = _inline(kind, namespace, definitions, defined)
    return schema


def _check_recursion(
    schema: Any, namespace: str, names: dict[str, Any], open_: tuple[str, ...]
) -> None:
    if isinstance(schema, str):
        if schema in PRIMITIVES:
            return
        full = _resolve(schema, namespace, names)
        if full in open_:
            raise SchemaUnreadable(f"recursive type {full!r}")
        return  # defined elsewhere: checked where it is written out
    if isinstance(schema, list):
        for branch in schema:
            _check_recursion(branch, namespace, names, open_)
        return
    kind = schema["type"]
    if kind in _NAMED:
        full, namespace = _full_name(schema, namespace)
        open_ = (*open_, full)
    if kind in ("record", "error"):
        for field in schema["fields"]:
            _check_recursion(field["type"], namespace, names, open_)
    elif kind == "array":
        _check_recursion(schema["items"], namespace, names, open_)
    elif kind == "map":
        _check_recursion(schema["values"], namespace, names, open_)
    elif not isinstance(kind, str):
        _check_recursion(kind, namespace, names, open_)


def _definition(schema: Any, namespace: str, names: dict[str, Any]) -> tuple[Any, str]:
    """A type with names resolved to their definitions, and the namespace inside it."""
    if isinstance(schema, str) and schema not in PRIMITIVES:
        full = _resolve(schema, namespace, names)
        return names[full], full.rpartition(".")[0]
    if isinstance(schema, dict) and isinstance(schema.get("type"), str | list | dict):
        inner = schema["type"]
        if schema["type"] in _NAMED:
            return schema, _full_name(schema, namespace)[1]
        if not isinstance(inner, str) or inner not in (*PRIMITIVES, "array", "map"):
            return _definition(inner, namespace, names)  # {"type": {...}} or {"type": "Name"}
    return schema, namespace


def _type_name(schema: Any, namespace: str) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    kind = schema["type"]
    return _full_name(schema, namespace)[0] if kind in _NAMED else kind


def _walk(
    schema: Any, namespace: str, names: dict[str, Any], steps: tuple[str, ...], leaves: list[Any]
) -> Node:
    schema, namespace = _definition(schema, namespace, names)
    if isinstance(schema, list):
        branches = [
            b
            for b in schema
            if _type_name(_definition(b, namespace, names)[0], namespace) != "null"
        ]
        kinds = sorted(_type_name(_definition(b, namespace, names)[0], namespace) for b in branches)
        if len(branches) == 1:
            return _walk(branches[0], namespace, names, steps, leaves)
        if kinds in (["int", "long"], ["double", "float"]):
            # Spark reads these unions as one long or double column: one leaf for both.
            for branch in branches:
                leaves.append(_definition(branch, namespace, names)[0])
            return Leaf("integer" if kinds[0] == "int" else None)
        return Union(
            tuple(
                Branch(
                    _type_name(_definition(b, namespace, names)[0], namespace),
                    index,
                    _walk(b, namespace, names, steps, leaves),
                )
                for index, b in enumerate(branches)
            )
        )
    kind = schema if isinstance(schema, str) else schema["type"]
    if steps:
        if kind in ("record", "error"):
            for field in schema["fields"]:
                if field["name"] == steps[0]:
                    return Field(
                        steps[0], _walk(field["type"], namespace, names, steps[1:], leaves)
                    )
            return Missing()
        if kind == "map":
            return Field(
                steps[0], _walk(schema["values"], namespace, names, steps[1:], leaves), map_key=True
            )
        return Leaf(None)  # a path into a value that has no fields
    leaves.append(schema)
    return _leaf(schema)


def _leaf(schema: Any) -> Leaf:
    kind = schema if isinstance(schema, str) else schema["type"]
    logical = None if isinstance(schema, str) else schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if isinstance(precision, int) and 0 < precision <= MAX_DECIMAL_PRECISION and scale == 0:
            return Leaf("decimal", precision)
        return Leaf(None)
    if logical not in (None, "uuid"):
        return Leaf(None)  # a date, time, duration or timestamp
    if kind == "string":
        return Leaf("text")
    if kind in ("bytes", "fixed"):
        return Leaf("bytes")
    if kind in ("int", "long"):
        return Leaf("integer")
    return Leaf(None)


def _strip_logical_types(schema: Any, keep: set[int]) -> None:
    """Drop logical types in place, except on the leaves `keep` names (by identity) that are
    ids as decimals."""
    if isinstance(schema, list):
        for branch in schema:
            _strip_logical_types(branch, keep)
        return
    if not isinstance(schema, dict):
        return
    if "logicalType" in schema and not (id(schema) in keep and _leaf(schema).id_type == "decimal"):
        for key in ("logicalType", "precision", "scale"):
            schema.pop(key, None)
    kind = schema.get("type")
    if kind in ("record", "error"):
        for field in schema["fields"]:
            if isinstance(field["type"], dict | list):
                _strip_logical_types(field["type"], keep)
    elif kind == "array":
        _strip_logical_types(schema["items"], keep)
    elif kind == "map":
        _strip_logical_types(schema["values"], keep)
    elif isinstance(kind, dict | list):
        _strip_logical_types(kind, keep)
