"""[collectors]: what the collectors sample and how often."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from dgm.config.problems import Problem


@dataclass(frozen=True)
class CollectorSettings:
    """What the collectors sample and how often."""

    # Seconds between two samples of the cluster; > 0.
    interval_s: float = 10.0
    # Regexes (re.search) over topic names: a topic is sampled when it matches an include
    # pattern and no exclude pattern. The default skips internal topics (__consumer_offsets).
    include_topics: tuple[str, ...] = (".*",)
    exclude_topics: tuple[str, ...] = ("^__",)

    def problems(self) -> Iterator[Problem]:
        if not (math.isfinite(self.interval_s) and self.interval_s > 0):
            yield "interval_s", f"expected a number of seconds > 0, got {self.interval_s!r}"
        for key in ("include_topics", "exclude_topics"):
            for index, pattern in enumerate(getattr(self, key)):
                try:
                    re.compile(pattern)
                except re.error as error:
                    yield f"{key}[{index}]", f"expected a regex, got {pattern!r} ({error})"
