"""Fixtures of the exporter tests."""

from __future__ import annotations

import os
import shutil

import pytest


@pytest.fixture(scope="session")
def promtool() -> str:
    """Debian's promtool (package prometheus); skipped without it, except in CI, which
    installs it (.ci/run): a missing promtool there is a broken setup."""
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            raise RuntimeError("promtool not found: .ci/run installs Debian's prometheus")
        pytest.skip("promtool not installed (apt-get install prometheus)")
    return found
