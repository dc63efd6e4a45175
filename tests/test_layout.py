"""Imports run one way (docs/design.md, "Layout"): core <- stages <- shell; the lab beside.

Reads every module's imports from its AST (including imports inside functions, which are
still dependencies) and checks each against the layer rules below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = "dgm"
STAGES = ("collectors", "spark_jobs", "alerts", "dashboard", "exporter")
SHELL = "shell"
LAB = "lab"
PACKAGES = (CORE, *STAGES, SHELL, LAB)
# The shell's commands that run the lab: `dgm lab run`, `dgm lab demo` and `dgm demo`. Nothing
# else of the shell, and nothing of the core or the stages, may import it.
LAB_RUNNERS = ("shell.lab_command", "shell.lab_demo_command", "shell.demo_command")


def imported_modules(path: Path) -> set[str]:
    """Absolute module names `path` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                found.add(node.module)
                # `from pkg import module` names modules too.
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def top(name: str) -> str:
    return name.split(".", 1)[0]


def violation(importer: str, imported: str) -> str | None:
    """Why `importer` may not import `imported`, or None when it may."""
    src, dst = top(importer), top(imported)
    if dst == "tests":
        return "a product module imports a test module"
    if dst not in PACKAGES or src == dst:
        return None
    if dst == LAB:
        if src == SHELL and importer in LAB_RUNNERS:
            return None
        return "only the shell's lab and demo commands may import the lab"
    if src == CORE:
        return "the core imports no stage, the shell or the lab"
    if src in STAGES:
        return None if dst == CORE else f"stage {src} imports {dst}"
    if src == LAB:
        return None if dst == CORE else f"the lab imports {dst}: it stands on the core only"
    return None  # the shell may import the core and every stage


def product_modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_every_package_is_found() -> None:
    for package in PACKAGES:
        assert (ROOT / package / "__init__.py").exists(), package


def test_imports_run_one_way() -> None:
    problems = []
    for path in product_modules():
        importer = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for imported in sorted(imported_modules(path)):
            why = violation(importer, imported)
            if why:
                problems.append(f"{importer} imports {imported}: {why}")
    assert problems == []


@pytest.mark.parametrize(
    ("importer", "imported", "allowed"),
    [
        ("collectors.cycle", "dgm.samples", True),
        ("collectors.cycle", "spark_jobs.job", False),
        ("spark_jobs.job", "alerts.run", False),
        ("dashboard.app", "alerts.evaluate", False),
        ("dgm.config", "collectors.cycle", False),
        ("dgm.config", "shell.cli", False),
        ("dgm.config", "lab.run", False),
        ("spark_jobs.audit.fingerprint", "lab.ledger", False),
        ("alerts.run", "tests.reference", False),
        ("shell.lab_command", "lab.run", True),
        ("shell.cli", "lab.run", False),
        ("shell.run_command", "lab.continuous", False),
        ("shell.analyze_command", "alerts.run", True),
        ("lab.run", "dgm.broker.cluster", True),
        ("lab.run", "collectors.cycle", False),
    ],
)
def test_rules(importer: str, imported: str, allowed: bool) -> None:
    assert (violation(importer, imported) is None) is allowed


def test_relative_and_from_imports_are_seen(tmp_path: Path) -> None:
    # The checker must see `from pkg import module` and imports inside functions.
    path = ROOT / "dgm" / "published.py"
    assert "duckdb" in imported_modules(path)
    names = imported_modules(ROOT / "shell" / "collect_command.py")
    assert any(top(n) == "collectors" for n in names)
