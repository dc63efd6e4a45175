"""How long each step of an analysis cycle took, for its progress line."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

Timings = dict[str, float]  # seconds per step of a cycle


@contextmanager
def timed(timings: Timings, step: str) -> Iterator[None]:
    began = time.perf_counter()
    try:
        yield
    finally:
        timings[step] = time.perf_counter() - began
