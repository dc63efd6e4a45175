"""The cells of the compatibility matrix (docs/compatibility.md) a test run covers: CI runs
every supported version in one mode (each 3.x line in the mode of DEFAULT_3X_MODES), and
DGM_LONG=1 adds the other mode of the 3.x lines."""

from __future__ import annotations

from typing import Any

import pytest

from embedded_kafka.versions import KRAFT, ZOOKEEPER, KafkaRelease, matrix
from tests.support.strength import LONG

# The mode each 3.x line runs in by default; 4.x lines have KRaft only.
DEFAULT_3X_MODES = {"3.6.2": KRAFT, "3.9.2": ZOOKEEPER}


def in_ci(release: KafkaRelease) -> bool:
    return DEFAULT_3X_MODES.get(release.version, KRAFT) == release.mode


def version_cells() -> list[Any]:
    """A pytest param per cell, those CI leaves to DGM_LONG=1 skipped."""
    others = pytest.mark.skip(reason="DGM_LONG=1 runs every version in every mode")

    def marks(r: KafkaRelease) -> tuple[Any, ...]:
        return () if LONG or in_ci(r) else (others,)

    return [pytest.param(r, id=f"{r.version}-{r.mode}", marks=marks(r)) for r in matrix()]
