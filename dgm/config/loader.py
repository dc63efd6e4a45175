"""Load and validate dgm.toml, and add pipelines to it.

One generic walker (`_convert`) turns parsed TOML into the dataclasses declared in the
section modules of `dgm.config`, so every type check and every error message is written once.
Errors name the file, the key path, what was expected and what was found, and never echo the value
of a client setting (it may be a credential).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import threading
import tomllib
import types
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from dgm.config.cluster import is_secret_key
from dgm.config.document import DgmConfig
from dgm.config.pipelines import PipelineConfig
from dgm.config.problems import ConfigError
from dgm.config.toml_edit import pipeline_block, splice, write_atomically

CONFIG_FILE_NAME = "dgm.toml"
ENV_CONFIG = "DGM_CONFIG"  # the config file, when no --config is given
ENV_STATE_DIR = "DGM_STATE_DIR"
ENV_BOOTSTRAP = "DGM_BOOTSTRAP"
ENV_SPARK_MASTER = "DGM_SPARK_MASTER"  # replaces analysis.spark_master; --master wins

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T", bound="DataclassInstance")


@dataclasses.dataclass(frozen=True)
class _At:
    """Where a value sits (file and key path), so any error can say so."""

    file: str
    base: Path  # directory that relative paths are relative to
    key: str = ""
    # Inside pass-through client settings: values are never echoed (they may be credentials).
    hide_values: bool = False

    def child(self, part: str | int) -> _At:
        if isinstance(part, int):
            return dataclasses.replace(self, key=f"{self.key}[{part}]")
        return dataclasses.replace(self, key=f"{self.key}.{part}" if self.key else part)

    def error(self, message: str) -> ConfigError:
        return ConfigError(
            f"{self.file}: {self.key}: {message}" if self.key else f"{self.file}: {message}"
        )

    def mismatch(self, expected_type: Any, value: object) -> ConfigError:
        return self.error(f"expected {_expected(expected_type)}, got {self.describe(value)}")

    def describe(self, value: object) -> str:
        kind = _TOML_KINDS.get(type(value), "table" if isinstance(value, dict) else "date/time")
        last_key = self.key.rsplit(".", 1)[-1]
        if self.hide_values or is_secret_key(last_key) or isinstance(value, dict):
            return kind
        text = repr(value) if not isinstance(value, bool) else str(value).lower()
        return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


_TOML_KINDS = {str: "string", int: "integer", float: "float", bool: "boolean", list: "array"}


def _is_optional(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp)


def _expected(tp: Any) -> str:
    """The expected type in words, as the user wrote TOML rather than Python."""
    origin, args = get_origin(tp), get_args(tp)
    if _is_optional(tp):
        return _expected(next(arg for arg in args if arg is not type(None)))
    if origin is Literal:
        return "one of " + ", ".join(repr(arg) for arg in args)
    if origin is tuple:
        item = "table" if dataclasses.is_dataclass(args[0]) else _expected(args[0])[2:]
        return f"an array of {item}s"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "a table"
    words = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
    return words.get(tp, "a path")


def _convert(value: object, tp: Any, at: _At) -> Any:
    """`value` from TOML as type `tp`, or a ConfigError naming the key."""
    origin, args = get_origin(tp), get_args(tp)
    if _is_optional(tp):  # TOML has no null: a key that is present holds the inner type
        return _convert(value, next(arg for arg in args if arg is not type(None)), at)
    if origin is Literal:
        if isinstance(value, str) and value in args:
            return value
        found = repr(value) if isinstance(value, str) else at.describe(value)
        raise at.error(f"expected {_expected(tp)}, got {found}")
    if origin is tuple:
        if not isinstance(value, list):
            raise at.mismatch(tp, value)
        return tuple(_convert(item, args[0], at.child(index)) for index, item in enumerate(value))
    if origin is dict and dataclasses.is_dataclass(args[1]):  # named tables: [clusters.<name>]
        if not isinstance(value, dict):
            raise at.mismatch(tp, value)
        return {key: _convert(item, args[1], at.child(key)) for key, item in value.items()}
    if origin is dict:
        if not isinstance(value, dict):
            raise dataclasses.replace(at, hide_values=True).mismatch(tp, value)
        return _flatten_settings(value, dataclasses.replace(at, hide_values=True))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise at.mismatch(tp, value)
        return _load_table(tp, value, at)
    # bool is a subclass of int: `retries = true` must not pass as 1.
    if tp is bool and isinstance(value, bool):
        return value
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is str and isinstance(value, str):
        return value
    if tp is Path and isinstance(value, str) and value:
        return at.base / Path(value).expanduser()
    if tp in (bool, int, float, str, Path):
        raise at.mismatch(tp, value)
    # A schema bug, not the user's.
    raise TypeError(f"dgm.config.loader cannot load values of type {tp!r}")


def field_value(cls: type[Any], name: str, value: object) -> Any:
    """`value` as field `name` of dataclass `cls` loads it from TOML (the same walker, so a
    form checks types as the file does); ValueError saying what was expected otherwise."""
    hint = get_type_hints(cls)[name]
    try:
        return _convert(value, hint, _At(file="", base=Path(".")))
    except ConfigError:
        raise ValueError(f"expected {_expected(hint)}, got {value!r}") from None


def _flatten_settings(table: Mapping[str, object], at: _At) -> dict[str, str]:
    """Client settings as flat dotted keys: TOML reads `sasl.mechanism = ...` as nested tables."""
    flat: dict[str, str] = {}
    for key, value in table.items():
        here = at.child(key)
        if isinstance(value, dict):
            nested = {f"{key}.{sub}": text for sub, text in _flatten_settings(value, here).items()}
        elif isinstance(value, bool):  # librdkafka and Java both parse these spellings
            nested = {key: "true" if value else "false"}
        elif isinstance(value, str | int | float):
            nested = {key: str(value)}
        else:
            raise here.error(f"expected a string, number or boolean, got {here.describe(value)}")
        for flat_key, text in nested.items():
            if flat_key in flat:
                raise at.child(flat_key).error("set twice (once quoted, once as a dotted key)")
            flat[flat_key] = text
    return flat


def _load_table(cls: type[_T], table: Mapping[str, object], at: _At) -> _T:
    """An instance of dataclass `cls` from a TOML table: unknown keys, missing keys, types."""
    hints = get_type_hints(cls)
    declared = {f.name: f for f in dataclasses.fields(cls) if f.metadata.get("toml", True)}
    for key in table:
        if key not in declared:
            close = difflib.get_close_matches(key, declared, n=1)
            hint = (
                f"did you mean {close[0]!r}?" if close else "expected one of " + ", ".join(declared)
            )
            raise at.child(key).error(f"unknown key ({hint})")
    values: dict[str, Any] = {}
    for name, declared_field in declared.items():
        has_default = not (
            declared_field.default is dataclasses.MISSING
            and declared_field.default_factory is dataclasses.MISSING
        )
        if name in table:
            values[name] = _convert(table[name], hints[name], at.child(name))
        elif not has_default:
            raise at.child(name).error(f"missing required key (expected {_expected(hints[name])})")
        elif isinstance(declared_field.default, Path):  # default paths are relative too
            values[name] = at.base / declared_field.default
    loaded = cls(**values)
    for key, problem in getattr(loaded, "problems", lambda: ())():
        raise (at.child(key) if key else at).error(problem)
    return loaded


_TOML_ERROR_LINE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
# In any string value: ${NAME} is the environment variable NAME; $${ is a literal ${.
_REFERENCE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{")


def _interpolate(value: object, at: _At, env: Mapping[str, str]) -> object:
    """`value` with ${NAME} replaced by the environment's NAME in every string it holds; a
    ConfigError naming the key and the variable when one is unset. Values are never echoed."""
    if isinstance(value, dict):
        return {key: _interpolate(item, at.child(key), env) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolate(item, at.child(index), env) for index, item in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def substitute(match: re.Match[str]) -> str:
        if match[0] == "$${":
            return "${"
        name = match[1]
        if name is None:
            raise at.error("expected ${NAME} (letters, digits, '_'), or $${ for a literal '${'")
        if name not in env:
            raise at.error(
                f"environment variable {name} is not set (the value says ${{{name}}}; "
                "write $${ for a literal '${')"
            )
        return env[name]

    return _REFERENCE.sub(substitute, value)


def _parse(text: str, file: str, base: Path) -> DgmConfig:
    """Validate TOML text as a DgmConfig (without environment overrides)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        message = str(error)
        at_line = _TOML_ERROR_LINE.search(message)
        if at_line is None:
            raise ConfigError(f"{file}: invalid TOML: {message}") from None
        reason = message[: at_line.start()]
        raise ConfigError(
            f"{file}: line {at_line[1]}: invalid TOML: {reason} (column {at_line[2]})"
        ) from None
    at = _At(file, base)
    interpolated = _interpolate(document, at, os.environ)
    assert isinstance(interpolated, dict)
    return _load_table(DgmConfig, interpolated, at)


def _read(path: Path, file: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {file}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{file}: not UTF-8 text (byte {error.start})") from None
    except OSError as error:
        raise ConfigError(f"{file}: cannot read: {error.strerror}") from None


def load_config(path: str | Path | None = None, *, cwd: Path | None = None) -> DgmConfig:
    """The validated config from `path`, else `<cwd>/dgm.toml` if present, else defaults.

    `cwd` stands in for the working directory (tests, the lab). Environment overrides apply
    last: DGM_STATE_DIR (relative to `cwd`) and DGM_BOOTSTRAP (the default cluster's only); an
    empty variable counts as unset. The pipelines' topics and groups of clusters other than the
    default one come qualified ('<cluster>/<topic>', dgm.contracts.clusters).
    """
    here = (cwd if cwd is not None else Path.cwd()).absolute()
    if path is None:
        found = here / CONFIG_FILE_NAME
        file = CONFIG_FILE_NAME if cwd is None else str(found)
        config = _load_file(found, file) if found.is_file() else None
    else:
        found = here / Path(path).expanduser()  # an absolute path stays as it is
        config = _load_file(found, str(path))
    if config is None:
        config = _load_table(DgmConfig, {}, _At("defaults", here))
    if state_dir := os.environ.get(ENV_STATE_DIR):
        config = dataclasses.replace(config, state_dir=here / Path(state_dir).expanduser())
    if bootstrap := os.environ.get(ENV_BOOTSTRAP):
        cluster = dataclasses.replace(config.cluster, bootstrap_servers=bootstrap)
        config = dataclasses.replace(config, cluster=cluster)
    if master := os.environ.get(ENV_SPARK_MASTER):
        analysis = dataclasses.replace(config.analysis, spark_master=master)
        config = dataclasses.replace(config, analysis=analysis)
    return config.with_qualified_names()


def _load_file(path: Path, file: str) -> DgmConfig:
    config = _parse(_read(path, file), file, path.parent)
    return dataclasses.replace(config, source=path)


def append_pipeline(path: Path, pipeline: PipelineConfig) -> None:
    """Add `pipeline` as a [[pipelines]] block to the file, replacing one of the same name.

    The rest of the file (comments included) is left as it is. The new text must load back
    with this pipeline equal to `pipeline` and everything else unchanged, or nothing is
    written. A relative external_sink.path is taken as relative to the file's directory, like
    every path in the file. Writers in one process take turns (lab runs in threads append to
    one file); writers in separate processes are not serialised: the last one wins.
    """
    with _APPENDING:
        _append_pipeline(Path(path).absolute(), pipeline)


_APPENDING = threading.Lock()


def _append_pipeline(path: Path, pipeline: PipelineConfig) -> None:
    file, base = str(path), path.parent
    old_text = _read(path, file) if path.exists() else ""
    old = _parse(old_text, file, base)  # refuse to edit a file that is already invalid
    block = pipeline_block(pipeline, base)
    new_text = splice(old_text, pipeline.name, block)
    try:
        new = _parse(new_text, file, base)
    except ConfigError as error:
        raise ConfigError(f"cannot add pipeline {pipeline.name!r}: {error}") from None
    kept = {p.name: p for p in old.pipelines if p.name != pipeline.name}
    if (
        pipeline_block(new.pipeline(pipeline.name), base) != block
        or {p.name: p for p in new.pipelines if p.name != pipeline.name} != kept
        or dataclasses.replace(new, pipelines=()) != dataclasses.replace(old, pipelines=())
    ):
        raise ConfigError(
            f"{file}: cannot add pipeline {pipeline.name!r} without changing other settings "
            "(is [[pipelines]] written as an inline array?); add it by hand"
        )
    write_atomically(path, new_text)
