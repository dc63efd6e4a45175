"""A configuration problem: the error dgm raises and the (key, what is wrong) pairs checks yield."""

from __future__ import annotations

from collections.abc import Iterator

from dgm.util.errors import UserFacingError


class ConfigError(UserFacingError):
    """The config (file or environment) says something dgm cannot use; the message names the key."""


# A failed check: (key relative to the checked table, "" for the table itself; what is wrong).
Problem = tuple[str, str]


def empty_names(key: str, names: tuple[str, ...]) -> Iterator[Problem]:
    for index, name in enumerate(names):
        if not name.strip():
            yield f"{key}[{index}]", f"expected a non-empty name, got {name!r}"
