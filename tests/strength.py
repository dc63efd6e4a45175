"""How hard the lab's fault runs push: CI's short version by default, the full one (the
issues' "killed at least 3 times" runs, the long fault suite) with DGM_LONG=1."""

from __future__ import annotations

import os
from typing import TypeVar

T = TypeVar("T")

LONG = os.environ.get("DGM_LONG") == "1"


def by_strength(short: T, full: T) -> T:
    """`full` under DGM_LONG=1, else `short`."""
    return full if LONG else short
