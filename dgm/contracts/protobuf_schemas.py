"""Protobuf schemas as a registry holds them (.proto text, references by import name), made
into what a reader decodes with: a FileDescriptorSet compiled at run time, and the message a
record's Confluent message indexes name (docs/design.md, "Records framed for a schema
registry").

A registry keeps what the serializer registered: .proto source from Confluent's Java
serdes, but confluent-kafka's Python serializer registers a base64 FileDescriptorProto, and
Apicurio hands that back as it is. Either way the schema is compiled: each .proto file is
written under the name it is imported by into a fresh temporary directory, each descriptor
goes into a descriptor set protoc reads imports from (--descriptor_set_in), and protoc (the
one grpcio-tools bundles, run in process) writes the descriptor set with every import
included. Google's well-known types come from grpcio-tools' own include directory, as the
serializers assume they need no reference.
"""

from __future__ import annotations

import base64
import binascii
import importlib.resources
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from dgm.contracts.registered_schemas import RegisteredSchema

# The name the registered schema itself is compiled under; a reference's import name can
# never be it (it is no valid import path for a registry to hand out: it starts with a dot).
ROOT_FILE = ".dgm_schema.proto"


class ProtobufUnreadable(ValueError):
    """A .proto text (or one of its references) that protoc does not compile."""


@dataclass(frozen=True)
class CompiledSchema:
    """A registered schema compiled: every file, imports first, and the schema's own."""

    files: descriptor_pb2.FileDescriptorSet
    root: descriptor_pb2.FileDescriptorProto


def compile_schema(schema: RegisteredSchema) -> CompiledSchema:
    """The descriptor set of a Protobuf schema and its references; ProtobufUnreadable when
    protoc refuses it (a syntax error, a missing or escaping import)."""
    sources: dict[str, str] = {}
    _gather(schema, ROOT_FILE, sources)
    given = descriptor_pb2.FileDescriptorSet()
    with tempfile.TemporaryDirectory(prefix="dgm-proto-") as directory:
        root = Path(directory)
        for name, text in sources.items():
            described = _descriptor(text)
            if described is not None:
                described.name = name  # as the files importing it name it
                given.file.append(described)
                continue
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        arguments = ["protoc", f"--proto_path={root}", f"--proto_path={_well_known_types()}"]
        if given.file:
            described_in = root / ".dgm_descriptor_set_in.pb"
            described_in.write_bytes(given.SerializeToString())
            arguments.append(f"--descriptor_set_in={described_in}")
        out = root / ".dgm_descriptor_set.pb"
        # The schema by its import name: protoc finds it on disk or in the given set.
        described_root = _descriptor(sources[ROOT_FILE]) is not None
        target_name = ROOT_FILE if described_root else str(root / ROOT_FILE)
        status = _protoc(
            [*arguments, f"--descriptor_set_out={out}", "--include_imports", target_name]
        )
        if status != 0 or not out.exists():
            raise ProtobufUnreadable(f"protoc refused the schema (exit {status})")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return compiled_from(files)


def compiled_from(files: descriptor_pb2.FileDescriptorSet) -> CompiledSchema:
    """A compiled schema from its descriptor set (compile_schema's, serialized and read back
    where the schema is decoded)."""
    own = [f for f in files.file if f.name == ROOT_FILE]
    if not own:
        raise ProtobufUnreadable("protoc wrote no descriptor for the schema")
    return CompiledSchema(files, own[0])


def _gather(schema: RegisteredSchema, name: str, sources: dict[str, str]) -> None:
    """Every file to write, by import name: the schema, its references, theirs."""
    if name in sources:
        if sources[name] != schema.text:
            raise ProtobufUnreadable(f"two schemas imported as {name!r}")
        return
    sources[name] = schema.text
    if len(schema.reference_names) != len(schema.references):
        raise ProtobufUnreadable("references without their import names")
    for reference, imported_as in zip(schema.references, schema.reference_names, strict=True):
        path = PurePosixPath(imported_as)
        # Written under a temporary directory: a name that would land outside it is refused.
        if path.is_absolute() or ".." in path.parts or not path.parts or imported_as == ROOT_FILE:
            raise ProtobufUnreadable(f"a reference imported as {imported_as!r}")
        _gather(reference, imported_as, sources)


_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]+")


def _descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A base64 FileDescriptorProto (what confluent-kafka's Python serializer registers), or
    None for .proto source: source always holds a character base64 has not (`;`, `"`)."""
    if not _BASE64.fullmatch(text):
        return None
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text))
    except (binascii.Error, DecodeError, ValueError) as error:
        raise ProtobufUnreadable(f"neither .proto source nor a descriptor: {error}") from error


def _protoc(arguments: list[str]) -> int:
    from grpc_tools import protoc  # imported when a Protobuf schema is first met

    return int(protoc.main(arguments))


def _well_known_types() -> str:
    return str(importlib.resources.files("grpc_tools") / "_proto")


def message_name(compiled: CompiledSchema, indexes: tuple[int, ...]) -> str | None:
    """The full name of the message Confluent's indexes name: [i] is the file's i-th top-level
    message, each further index a nested type of the one before; None when they name none."""
    if not indexes:
        return None
    candidates = compiled.root.message_type
    found: descriptor_pb2.DescriptorProto | None = None
    names: list[str] = []
    for index in indexes:
        if not 0 <= index < len(candidates):
            return None
        found = candidates[index]
        names.append(found.name)
        candidates = found.nested_type
    package = compiled.root.package
    return ".".join([package, *names] if package else names)
