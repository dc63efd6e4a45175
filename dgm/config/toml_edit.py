"""Write dgm.toml text: a pipeline as a [[pipelines]] block, spliced into existing text.

Textual on purpose (no TOML writer dependency): comments and layout of the user's file stay.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING

from dgm.config.pipelines import PipelineConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


# A table header line: [name] or [[name]], with an optional trailing comment.
_HEADER = re.compile(r"[ \t]*\[(\[?)([^\[\]#]+)\]\]?[ \t]*(#.*)?")


def splice(text: str, name: str, block: str) -> str:
    """`text` with the [[pipelines]] group named `name` replaced by `block`, or `block` added."""
    lines = text.splitlines(keepends=True)
    headers = [
        (index, bool(match[1]), re.sub(r"\s", "", match[2]))
        for index, line in enumerate(lines)
        if (match := _HEADER.fullmatch(line.rstrip("\r\n")))
    ]
    for position, (start, is_array, table) in enumerate(headers):
        if not (is_array and table == "pipelines"):
            continue
        ends = (i for i, _, t in headers[position + 1 :] if not t.startswith("pipelines."))
        end = next(ends, len(lines))
        # Comments and blank lines before the next header describe that header: keep them.
        while end > start + 1 and (
            not lines[end - 1].strip() or lines[end - 1].lstrip()[:1] == "#"
        ):
            end -= 1
        try:
            group = tomllib.loads("".join(lines[start:end]))
        except tomllib.TOMLDecodeError:
            continue  # the check after splicing reports what this misses
        if group["pipelines"][0].get("name") == name:
            return "".join(lines[:start]) + block + "".join(lines[end:])
    head = text if not text or text.endswith("\n") else text + "\n"
    return head + ("\n" if head.strip() else "") + block


def pipeline_block(pipeline: PipelineConfig, base: Path) -> str:
    return "".join(_table_lines(pipeline, "[[pipelines]]", "pipelines", base))


def _table_lines(obj: DataclassInstance, header: str, prefix: str, base: Path) -> list[str]:
    """TOML for a config dataclass: fields that differ from their default, sub-tables last."""
    lines, subtables = [header + "\n"], []
    for declared in dataclasses.fields(obj):
        value = getattr(obj, declared.name)
        default = declared.default
        if declared.default_factory is not dataclasses.MISSING:
            default = declared.default_factory()
        if value is None or value == default:
            continue
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            table = f"{prefix}.{declared.name}"
            subtables += ["\n", *_table_lines(value, f"[{table}]", table, base)]
        else:
            lines.append(f"{declared.name} = {_toml_value(value, base)}\n")
    return lines + subtables


def _toml_value(value: object, base: Path) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, Path):  # relative to the file when inside its directory: portable
        text = value.relative_to(base).as_posix() if value.is_relative_to(base) else str(value)
        return _toml_string(text)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(item, base) for item in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


# TOML basic strings: every control character escaped, short forms where TOML has them.
_ESCAPES = {code: f"\\u{code:04X}" for code in (*range(0x20), 0x7F)}
_ESCAPES.update({ord("\n"): "\\n", ord("\t"): "\\t", ord("\r"): "\\r"})
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\"})


def _toml_string(text: str) -> str:
    """A basic string that loads back as `text`: '${' escaped as '$${' (dgm.config reads
    ${NAME} as an environment variable)."""
    return '"' + text.translate(_ESCAPES).replace("${", "$${") + '"'


def write_atomically(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, rename over: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The file may hold credentials: keep its permissions (new files: rw-r--r--).
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as temp:
            temp.write(text)
            temp.flush()
            os.fsync(temp.fileno())
        os.chmod(temp_name, mode)
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
