"""The rules that find a record's message id and read its audit headers: one definition for
every reader (docs/design.md, "Message identity and the audit headers"; the header names are
dgm/contracts/headers.py's).

The audit applies them as Spark columns (spark_jobs/audit/message_id_columns.py and
spark_jobs/audit/record_columns.py), the watch in Python (watch/ids.py), the core's
`headers.parse_src` in Python too. Patterns are Java regexes, as Spark's rlike and
regexp_extract read them; a reader on another engine says how it reads them alike.
tests/watch/test_ids.py and tests/watch/test_header_values.py hold the readers equal.
"""

from __future__ import annotations

import re

# An id longer than this, in code points, is kept as DIGEST_PREFIX and its SHA-256 in hex:
# fingerprints stay small (a header may hold megabytes), equal ids stay equal.
MAX_ID_CHARS = 1024
DIGEST_PREFIX = "sha256:"
# Bytes that are no UTF-8 (a key, a header value) are read as HEX_PREFIX and their hex in
# upper case: never two ids made one by replacement characters.
HEX_PREFIX = "0x"
# kind = "hash": SHA-256 of the key's byte length, ':', the key and the value; the length
# of no key is this, so (key "a", value "b") and (no key, value "ab") differ.
NO_KEY_LENGTH = -1

# kind = "json_field": the value at the path is an id when its variant type (Spark's
# schema_of_variant) is a string, an integer or a decimal without decimals (10.00 is
# DECIMAL(2,0)); objects, arrays, booleans, null, fractions and doubles are not.
JSON_ID_TYPES = ("STRING", "TINYINT", "SMALLINT", "INT", "BIGINT")
JSON_ID_DECIMAL = r"^DECIMAL\([0-9]+,0\)$"

# dgm-seq: a run of ASCII digits short enough for a bigint, so its cast never overflows;
# anything else is no sequence. The audit anchors it with Java's `$`, which also passes one
# line terminator ending the text (and its cast trims it); the watch's fullmatch does not,
# so "41\n" is 41 in a fingerprint and no sequence in the watch's seen duplicates.
SEQ_DIGITS = "[0-9]{1,18}"

# dgm-src, `topic/partition/offset` (headers.format_src): a non-empty topic, which may hold
# '/', then two digit runs short enough for an int and a bigint. SRC_PATTERN is the
# definition; its groups are the three parts.
SRC_TOPIC = ".+"
SRC_PARTITION = "[0-9]{1,9}"
SRC_OFFSET = "[0-9]{1,18}"
SRC_PATTERN = f"^({SRC_TOPIC})/({SRC_PARTITION})/({SRC_OFFSET})$"

# What Java's `.` takes no line terminator of, and its `$` passes one of ending the text.
_JAVA_LINE_ENDS = "\n\r\x85\u2028\u2029"
# SRC_PATTERN as Java reads it, in Python's re (whose `.` and `$` know only '\n').
_SRC_IN_PYTHON = re.compile(
    f"([^{_JAVA_LINE_ENDS}]+)/({SRC_PARTITION})/({SRC_OFFSET})(?:\r\n|[{_JAVA_LINE_ENDS}])?"
)


def is_json_id_type(variant_type: str) -> bool:
    """Whether a JSON value of `variant_type` (schema_of_variant's name) is an id."""
    return variant_type in JSON_ID_TYPES or re.search(JSON_ID_DECIMAL, variant_type) is not None


def src_parts(text: str) -> tuple[str, int, int] | None:
    """(topic, partition, offset) of a dgm-src text as Spark's regexp_extract of SRC_PATTERN
    finds them; None where the pattern does not match."""
    found = _SRC_IN_PYTHON.fullmatch(text)
    return None if found is None else (found[1], int(found[2]), int(found[3]))


def bytes_text(raw: bytes) -> str:
    """Bytes as an id's text, as a key is read: UTF-8 as it is, anything else HEX_PREFIX and
    its hex in upper case (Spark's F.hex), never two ids made one by replacement characters."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return HEX_PREFIX + raw.hex().upper()
