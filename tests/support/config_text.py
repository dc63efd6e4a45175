"""A dgm.toml written from a test's text and loaded as dgm loads it."""

from __future__ import annotations

from pathlib import Path

from dgm.config.document import DgmConfig
from dgm.config.loader import load_config


def load_text(tmp_path: Path, text: str) -> DgmConfig:
    """Load `text` as <tmp_path>/dgm.toml, named 'dgm.toml' in error messages."""
    (tmp_path / "dgm.toml").write_text(text, encoding="utf-8")
    return load_config("dgm.toml", cwd=tmp_path)
