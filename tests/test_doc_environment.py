"""docs/configuration.md's environment-variable table is the one list of the DGM_* variables:
every DGM_* name the code (product, lab, benches, tests) writes as a string is a row there, and
every row names a variable the code reads. DGM_TEST_* names are values the config tests
interpolate, not settings."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"
FOLDERS = ("dgm", "collectors", "spark_jobs", "alerts", "dashboard", "exporter", "shell", "lab",
           "embedded_kafka", "bench", "tests")  # fmt: skip
NAME = re.compile(r"DGM_[A-Z0-9_]+")


def read_by_code() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    name = node.value
                    if NAME.fullmatch(name) and not name.startswith("DGM_TEST_"):
                        found.setdefault(name, path.relative_to(ROOT))
    return found


def documented() -> set[str]:
    text = PAGE.read_text()
    table = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in NAME.findall(row.split("|")[1])}


def test_every_variable_the_code_reads_is_in_the_table() -> None:
    missing = read_by_code().keys() - documented()
    assert not missing, f"add a row to {PAGE.name}'s environment-variable table: {sorted(missing)}"


def test_every_variable_in_the_table_is_read_by_the_code() -> None:
    stale = documented() - read_by_code().keys()
    assert not stale, f"{PAGE.name} documents variables nothing reads: {sorted(stale)}"


def test_the_scan_finds_the_config_variables() -> None:
    # The scan itself: the variables dgm.config.loader reads must be among what it finds.
    expected = {"DGM_CONFIG", "DGM_STATE_DIR", "DGM_BOOTSTRAP", "DGM_SPARK_MASTER"}
    assert expected <= set(read_by_code())
