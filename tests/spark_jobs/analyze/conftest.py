"""What the analysis' differential tests share: one shuffle partition for small generated sets
(a few rows over the default partitions would spend the time in task overhead)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import engine_run


@pytest.fixture
def one_shuffle_partition(spark: Any) -> Iterator[None]:
    with engine_run.shuffle_partitions(spark, 1):
        yield
