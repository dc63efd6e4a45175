"""Where dgm keeps things: the per-user cache (downloads) and the state directory (data)."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """Downloads shared by every project of this user (Kafka jars, Spark packages)."""
    base = os.environ.get("DGM_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "dgm"
