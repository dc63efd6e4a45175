"""The registered-schema contract: a lookup error keeps its short reason wherever it goes."""

from __future__ import annotations

import pickle

from dgm.contracts.registered_schemas import RegisteredSchema, SchemaLookupError


def test_a_lookup_error_keeps_its_reason_across_processes() -> None:
    error = pickle.loads(pickle.dumps(SchemaLookupError("not found", "content id 7")))
    assert (error.reason, error.detail) == ("not found", "content id 7")
    assert str(error) == "not found: content id 7"
    assert SchemaLookupError("unreachable").reason == str(SchemaLookupError("unreachable"))


def test_a_schema_with_references_is_a_value() -> None:
    imported = RegisteredSchema(1, "PROTOBUF", 'syntax = "proto3";')

    def made() -> RegisteredSchema:
        return RegisteredSchema(2, "PROTOBUF", "import ...", (imported,), ("a.proto",))

    assert made() == made() and hash(made()) == hash(made())  # usable as a cache key
