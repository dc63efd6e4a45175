"""Fixtures of the alert tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.webhook_receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local HTTP receiver of webhook posts, stopped after the test."""
    running = Receiver()
    yield running
    running.stop()
