"""Message ids without Spark: the twin of `message_id` in
spark_jobs/audit/message_id_columns.py, both applying the rules of
dgm/contracts/message_ids.py.

The watch must find, for each Kafka record, exactly the id the audit finds, so this follows
what Spark 4.0 does rather than what looks natural in Python: the JVM's UTF-8 decoding,
Jackson's JSON parsing and limits, the variant type Spark gives each JSON value (which the
rules say is an id or not) and its text, and variant_get's path syntax.
tests/watch/test_ids.py compares both on awkward records.
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dgm.config.pipelines import MessageIdRule
from dgm.contracts.message_ids import (
    DIGEST_PREFIX,
    MAX_ID_CHARS,
    NO_KEY_LENGTH,
    SEQ_DIGITS,
    bytes_text,
    is_json_id_type,
)
from dgm.contracts.registry_framing import (
    EMPTY_ID,
    FIELD_MISSING,
    NO_REGISTRY,
    NOT_AN_ID,
    PAYLOAD_UNREADABLE,
)

# As confluent_kafka's Message.headers() gives them.
Headers = Sequence[tuple[str, bytes | None]] | None


class RegistryReader(Protocol):
    """What reads kind = "registry_field" (watch/registry_ids.RegistryIds)."""

    def find(
        self, dotted: str, value: bytes | None, headers: Headers
    ) -> tuple[str | None, str | None]: ...


# Jackson 2.18's default StreamReadConstraints, which Spark's try_parse_json runs under: a
# document beyond any of them is no JSON at all. Lengths count UTF-16 units (Java chars);
# number lengths count digits (integer, fraction and exponent), not signs or points.
MAX_DEPTH = 1000
MAX_NUMBER_DIGITS = 1000
MAX_NAME_CHARS = 50_000
MAX_STRING_CHARS = 20_000_000
# A DECIMAL has at most 38 digits and 38 decimals; a number beyond becomes a DOUBLE.
MAX_DECIMAL_DIGITS = 38
_BLANKS = " \t\n\r"  # all Jackson skips around a value (no BOM, no form feed)
_JAVA_UTF8 = "dgm.java-utf-8"
_SEQ = re.compile(SEQ_DIGITS)


def message_id(
    rule: MessageIdRule,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
    registry: RegistryReader | None = None,
) -> str | None:
    """The id the audit's `message_id(rule)` column gives this record; None for none.
    `registry` reads kind = "registry_field" (without one, such a record has no id)."""
    return identify(rule, key, value, headers, registry)[0]


def identify(
    rule: MessageIdRule,
    key: bytes | None,
    value: bytes | None,
    headers: Headers,
    registry: RegistryReader | None = None,
) -> tuple[str | None, str | None]:
    """(id, None), or (None, why not) where the rule says why (registry_field's reasons,
    dgm/contracts/registry_framing.py); the other kinds give no reason."""
    reason = None
    if rule.kind == "registry_field":
        if registry is None:
            return None, NO_REGISTRY
        found, reason = registry.find(rule.name, value, headers)
        if found == "":
            return None, EMPTY_ID
    else:
        found = _found(rule, key, value, headers)
    if not found:
        return None, reason  # an empty id is none
    if len(found) > MAX_ID_CHARS:  # F.length counts code points, as len() does
        return DIGEST_PREFIX + hashlib.sha256(found.encode()).hexdigest(), None
    return found, None


def _found(
    rule: MessageIdRule, key: bytes | None, value: bytes | None, headers: Headers
) -> str | None:
    if rule.kind == "header":
        found = header_text(headers, rule.name)
    elif rule.kind == "json_field":
        found = _json_id(value, _path(rule.name))
    elif rule.kind == "key":
        found = None if key is None else bytes_text(key)
    elif rule.kind == "hash":
        found = _key_value_hash(key, value)
    else:
        raise ValueError(f"unknown message id kind {rule.kind!r}")
    return found


def header_text(headers: Headers, name: str) -> str | None:
    """The text of header `name`: its last non-null value when it repeats (as header())."""
    for key, value in reversed(headers or ()):
        if key == name and value is not None:
            return bytes_text(value)
    return None


def seq_number(text: str | None) -> int | None:
    """The dgm-seq of a header's text: a run of ASCII digits short enough for a bigint, else
    None (where the audit's column reads it otherwise: message_ids.SEQ_DIGITS)."""
    return int(text) if text is not None and _SEQ.fullmatch(text) else None


def _key_value_hash(key: bytes | None, value: bytes | None) -> str | None:
    if key is None and value is None:
        return None
    # The key's byte length goes first, so ("a", "b") and (None, "ab") differ.
    framed = b"%d:" % (NO_KEY_LENGTH if key is None else len(key)) + (key or b"") + (value or b"")
    return hashlib.sha256(framed).hexdigest()


# --- json_field: try_parse_json(value as string), then variant_get of the path -------------


@dataclass(frozen=True)
class _Number:
    """A JSON number: its text as variant_get gives it, and the variant type Spark gives it."""

    text: str
    variant_type: str


class _Refused(ValueError):
    """JSON that Spark's parser refuses although Python's would take it."""


def _json_id(value: bytes | None, path: tuple[str | int, ...]) -> str | None:
    return None if value is None else _json_found(value, path)[0]


def json_id_reason(payload: bytes, dotted: str) -> tuple[str | None, str | None]:
    """kind = "json_field" over a registry record's payload: (id, None) or (None, why not):
    no JSON, the path missing or null, a value of no id type."""
    return _json_found(payload, _path(dotted))


def _json_found(value: bytes, path: tuple[str | int, ...]) -> tuple[str | None, str | None]:
    node = _parse(value.decode("utf-8", _JAVA_UTF8))
    if node is _REFUSED:
        return None, PAYLOAD_UNREADABLE
    for step in path:
        in_array = isinstance(node, list) and isinstance(step, int) and step < len(node)
        if not (in_array or (isinstance(node, dict) and step in node)):
            return None, FIELD_MISSING
        node = node[step]
    kind = _variant_type(node)
    if not is_json_id_type(kind):
        return None, FIELD_MISSING if kind == "VOID" else NOT_AN_ID
    return (node.text if isinstance(node, _Number) else _java_text(node)), None


def _variant_type(node: Any) -> str:
    """The type Spark's schema_of_variant names for a parsed JSON value."""
    if isinstance(node, _Number):
        return node.variant_type
    if isinstance(node, str):
        return "STRING"
    if isinstance(node, bool):
        return "BOOLEAN"
    if node is None:
        return "VOID"
    return "OBJECT" if isinstance(node, dict) else "ARRAY"


_REFUSED = object()


def _parse(text: str) -> Any:
    """The JSON value at the start of `text` as Spark's try_parse_json reads it; _REFUSED if
    it refuses. Like Jackson, whatever follows the first value is never read."""
    start = len(text) - len(text.lstrip(_BLANKS))
    try:
        tree, end = _decode(text, start)
    except (ValueError, RecursionError):  # JSONDecodeError and _Refused are ValueErrors
        return _REFUSED
    # Depth and string lengths need a walk: only where the text is deep or long enough.
    maybe_deep = text.count("[", start, end) + text.count("{", start, end) > MAX_DEPTH
    if (maybe_deep or end - start > MAX_STRING_CHARS // 2) and not _within_limits(tree):
        return _REFUSED
    return tree


def _decode(text: str, start: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except RecursionError:
        # Python 3.11's scanner spends the recursion limit on nesting; Jackson allows 1000
        # levels, so try once more with that much room (deeper still fails, as in Spark).
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + MAX_DEPTH + 100)
        try:
            return _DECODER.raw_decode(text, start)
        finally:
            sys.setrecursionlimit(limit)


def _within_limits(tree: Any) -> bool:
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > MAX_DEPTH:
                return False
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(node, str) and _utf16_length(node) > MAX_STRING_CHARS:
            return False
    return True


def _utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Spark refuses duplicate keys anywhere (spark.sql.variant.allowDuplicateKeys=false),
    # where Python's json would keep the last.
    if len({name for name, _ in pairs}) != len(pairs):
        raise _Refused("duplicate key")
    if any(
        len(name) > MAX_NAME_CHARS // 2 and _utf16_length(name) > MAX_NAME_CHARS
        for name, _ in pairs
    ):
        raise _Refused("name too long")
    return {_java_text(name): child for name, child in pairs}


def _integer(token: str) -> _Number:
    digits = len(token) - token.startswith("-")
    if digits > MAX_NUMBER_DIGITS:
        raise _Refused("number too long")
    # A BIGINT, or beyond it a DECIMAL(digits,0) up to 38 digits; then a DOUBLE.
    if digits > MAX_DECIMAL_DIGITS:
        return _Number(token, "DOUBLE")  # no id, so its text is never read
    value = int(token)  # str(int(...)): "-0" is 0
    bigint = -(2**63) <= value < 2**63
    return _Number(str(value), "BIGINT" if bigint else f"DECIMAL({digits},0)")


def _fraction(token: str) -> _Number:
    if len(token) - sum(map(token.count, "-+.eE")) > MAX_NUMBER_DIGITS:
        raise _Refused("number too long")
    if "e" in token or "E" in token:
        return _Number(token, "DOUBLE")  # always
    # A BigDecimal within 38 digits and 38 decimals is a DECIMAL; its type is taken with
    # trailing zeros stripped, so 10.00 is DECIMAL(2,0) with text "10".
    whole, _, decimals = token.partition(".")
    unscaled = int(whole + decimals)
    if len(decimals) > MAX_DECIMAL_DIGITS or len(str(abs(unscaled))) > MAX_DECIMAL_DIGITS:
        return _Number(token, "DOUBLE")
    quotient, remainder = divmod(abs(unscaled), 10 ** len(decimals))
    scale = len(decimals.rstrip("0"))
    if remainder:  # a fraction: no id, so its text is never read
        digits = len(str(abs(unscaled) // 10 ** (len(decimals) - scale)))
        return _Number(token, f"DECIMAL({max(digits, scale)},{scale})")
    return _Number(str(-quotient if unscaled < 0 else quotient), f"DECIMAL({len(str(quotient))},0)")


def _no_constant(token: str) -> Any:
    raise _Refused(f"{token} is not JSON")  # Jackson refuses NaN and Infinity


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object,
    parse_int=_integer,
    parse_float=_fraction,
    parse_constant=_no_constant,
)


def _java_text(text: str) -> str:
    """`text` as the JVM stores it (String.getBytes(UTF_8)): a lone surrogate, which a JSON
    \\uD800 escape can make, becomes '?'."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode()


def _java_replacement(error: UnicodeError) -> tuple[str, int]:
    """Decode invalid UTF-8 as the JVM's new String(bytes, UTF_8) does (value.cast("string")
    keeps the bytes; try_parse_json decodes them so): one U+FFFD for as many bytes as the JDK
    takes (java.lang.String.decodeUTF8_UTF16). Python's own 'replace' differs on encoded
    surrogates and truncated sequences: ED A0 80 is one U+FFFD in Java, three in Python."""
    assert isinstance(error, UnicodeDecodeError)
    data, at = error.object, error.start
    lead, rest = data[at], len(data) - at - 1

    def follows(n: int) -> bool:
        return data[at + n] & 0xC0 == 0x80

    if 0xE0 <= lead <= 0xEF:  # a 3-byte lead
        second_bad = rest >= 1 and (
            (lead == 0xE0 and data[at + 1] & 0xE0 == 0x80) or not follows(1)
        )
    elif 0xF0 <= lead <= 0xF7:  # a 4-byte lead (F5 to F7 are never valid)
        second = data[at + 1] if rest >= 1 else 0x80
        second_bad = (
            lead > 0xF4
            or (lead == 0xF0 and not 0x90 <= second <= 0xBF)
            or (lead == 0xF4 and second & 0xF0 != 0x80)
            or second & 0xC0 != 0x80
        )
    else:  # a 2-byte lead without its second byte, or no lead at all
        second_bad = True
    # A surrogate (ED A0 80) or a truncated end is replaced whole; a bad third byte after
    # two good ones leaves it for the next character.
    taken = 1 if second_bad else (3 if follows(2) else 2) if rest >= 2 else rest + 1
    return "\ufffd", at + taken


codecs.register_error(_JAVA_UTF8, _java_replacement)


# Spark's VariantPathParser (no blanks skipped): .key, ['key'], ["key"] or [index].
_SEGMENT = re.compile(r"\.([^.\[]+)|\['([^']*)'\]|\[\"([^\"]*)\"\]|\[([0-9]+)\]")
_MAX_INDEX = 2**31 - 1


@functools.lru_cache(maxsize=256)
def _path(dotted: str) -> tuple[str | int, ...]:
    """The steps of `$.<dotted>` (message_id_columns.json_path) as variant_get reads them;
    a path it refuses fails the audit, so it raises here too."""
    text, at = "." + dotted, 0
    steps: list[str | int] = []
    while at < len(text):
        match = _SEGMENT.match(text, at)
        if match is None or (match[4] is not None and int(match[4]) > _MAX_INDEX):
            raise ValueError(f"{dotted!r} is not a JSON path variant_get takes")
        dot, single, double, index = match.groups()
        key = dot if dot is not None else single if single is not None else double
        steps.append(int(index) if key is None else key)
        at = match.end()
    return tuple(steps)
