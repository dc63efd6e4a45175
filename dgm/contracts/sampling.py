"""Id-hash sampling: which message ids a sampled pipeline keeps, and how far its rates can be
trusted (docs/design.md, "Sampled pipelines").

A pipeline sampled at 1 in N keeps, on every side, every record whose id hashes below 2^63 / N
(the hash is Spark's xxhash64 of the id, shifted right one bit to make it non-negative), so an
id's copies are all kept or all dropped and the kept ids' duplicates, losses and aborted reads
are exact. The thresholds nest: an id kept at 1 in 100 is kept at 1 in 10.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

KEEP_ALL = 1
# Two-sided 95% Wilson score interval (docs/design.md, "Sampled pipelines").
Z_95 = 1.959963984540054
_HASH_SPAN = 2**63  # xxhash64 >>> 1 lies in [0, 2^63)


def kept_below(one_in: int) -> int:
    """The hash bound of a 1-in-`one_in` sample: an id is kept iff its hash is below it."""
    if one_in < KEEP_ALL:
        raise ValueError(f"a sample keeps 1 in N ids, N >= 1; got {one_in}")
    return _HASH_SPAN // one_in


def wilson_interval(hits: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of a rate seen as `hits` in `trials`; None without trials.

    Taken over the kept ids as independent draws: it ignores the finite-population correction
    (so it is a little wide) and treats a duplicated id's extra copies as one draw each (so
    it is a little narrow when an id is copied many times).
    """
    if trials <= 0:
        return None
    rate = min(hits, trials) / trials
    z2 = z * z
    centre = (rate + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z / (1 + z2 / trials) * math.sqrt(rate * (1 - rate) / trials + z2 / (4 * trials**2))
    # At p = 0 (p = 1) the low (high) end is exactly 0 (1); rounding would miss it.
    low = 0.0 if hits <= 0 else max(0.0, centre - half)
    high = 1.0 if hits >= trials else min(1.0, centre + half)
    return low, high


def sample_conflicts(
    pipelines: Iterable[tuple[int, str, tuple[str, ...], int]],
) -> Iterator[tuple[str, str]]:
    """(key, problem) for a topic that two pipelines sample at different shares: a topic's
    fingerprints are kept at one share. `pipelines`: (index, name, topics, one_in)."""
    first: dict[str, tuple[int, str]] = {}
    for index, name, topics, one_in in pipelines:
        for topic in topics:
            seen, owner = first.setdefault(topic, (one_in, name))
            if seen != one_in:
                yield (
                    f"pipelines[{index}].sample_one_in",
                    f"topic {topic!r} is sampled 1 in {seen} by pipeline {owner!r} and 1 in "
                    f"{one_in} by pipeline {name!r}; a topic keeps one sample, so give the "
                    "pipelines that share it the same sample_one_in",
                )


def rate_interval(hits: int, trials: int, one_in: int) -> tuple[float | None, float | None]:
    """The 95% interval of the rate `hits` / `trials` counted over a 1-in-`one_in` sample:
    the rate itself at both ends when every id is kept (the count is exact); the Wilson
    interval otherwise; (None, None) without trials, or when there are more hits than
    trials (a rate above 1, e.g. more extra copies than ids, is no proportion)."""
    if trials <= 0:
        return None, None
    if one_in <= KEEP_ALL:
        return hits / trials, hits / trials
    found = wilson_interval(hits, trials) if hits <= trials else None
    return found if found is not None else (None, None)
