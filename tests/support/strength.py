"""How hard the lab's fault runs push: CI's short version by default, the full one (the
issues' "killed at least 3 times" runs, the long fault suite) with DGM_LONG=1."""

from __future__ import annotations

import os
from typing import TypeVar

import pytest

T = TypeVar("T")

LONG = os.environ.get("DGM_LONG") == "1"


def by_strength(short: T, full: T) -> T:
    """`full` under DGM_LONG=1, else `short`."""
    return full if LONG else short


# A run whose every assertion a shorter test makes too (e.g. the lab's own Streams and
# MirrorMaker 2 runs, which the verdict tests repeat against the same truth): DGM_LONG=1 only.
only_at_full_strength = pytest.mark.skipif(
    not LONG, reason="covered by a shorter test; DGM_LONG=1 runs it"
)
