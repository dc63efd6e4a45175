"""One floor down from tests/test_layout.py: the core is in rooms, and every name has one
import path (docs/design.md, "Layout").

- The core (`dgm/`) holds no module of its own but subpackages, each a room by concern whose
  `__init__.py` is a one-line docstring and nothing else: a reader finds a name by its room,
  and no package re-exports what its modules define.
- An import names a first-party module's own definitions (or a submodule): `from dgm.config.
  loader import PipelineConfig` would work through the loader's own import, and then a name
  would be reachable twice and a move would leave stale paths behind.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "dgm"
FIRST_PARTY = (
    "dgm", "collectors", "spark_jobs", "alerts", "dashboard", "exporter", "watch", "shell",
    "lab", "embedded_kafka", "embedded_registry",
)  # fmt: skip
# Where imports are checked: the product, the lab, the tools, the tests and the benchmarks.
IMPORTERS = (*FIRST_PARTY, "tests", "bench")


def module_path(module: str) -> Path | None:
    """The file of first-party `module` ("dgm.config.loader"), or None when it is none."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@cache
def defined_names(path: Path) -> frozenset[str]:
    """Names `path` defines at module level: functions, classes, assignments (in `if` and
    `try` blocks too). Imported names are not among them."""
    names: set[str] = set()
    nodes: list[ast.stmt] = list(ast.parse(path.read_text(), filename=str(path)).body)
    while nodes:
        node = nodes.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try):
            nodes.extend(node.body)
            nodes.extend(node.orelse)
            if isinstance(node, ast.Try):
                nodes.extend(node.finalbody)
                nodes.extend(s for h in node.handlers for s in h.body)
    return frozenset(names)


def reexported_imports(path: Path) -> list[str]:
    """`from M import N` in `path` where M is first-party and N is neither defined in M nor
    a submodule of it, as 'line: M.N'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
            continue
        if node.module.split(".", 1)[0] not in FIRST_PARTY:
            continue
        source = module_path(node.module)
        if source is None:
            continue
        for alias in node.names:
            name = alias.name
            if name == "__version__" and node.module == "dgm":
                continue  # the package's version is the one thing dgm/__init__.py defines
            if name not in defined_names(source) and module_path(f"{node.module}.{name}") is None:
                found.append(f"{node.lineno}: {node.module}.{name}")
    return found


def test_the_core_holds_rooms_only() -> None:
    loose = sorted(p.name for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert loose == [], "core modules outside a room"
    rooms = sorted(p.parent for p in CORE.glob("*/__init__.py"))
    assert len(rooms) >= 4
    for init in (room / "__init__.py" for room in rooms):
        body = ast.parse(init.read_text()).body
        assert len(body) == 1, f"{init.relative_to(ROOT)}: a docstring and nothing else"
        doc = ast.get_docstring(init_module := ast.parse(init.read_text()))
        assert doc and "\n" not in doc, f"{init.relative_to(ROOT)}: a one-line docstring"
        assert init_module.body[0].lineno == 1


def everywhere(check: Callable[[Path], list[str]]) -> list[str]:
    """`check`'s findings over every file of IMPORTERS, as 'path: finding'."""
    return [
        f"{path.relative_to(ROOT)}: {found}"
        for top in IMPORTERS
        for path in sorted((ROOT / top).rglob("*.py"))
        for found in check(path)
    ]


def test_every_name_has_one_import_path() -> None:
    problems = everywhere(reexported_imports)
    assert problems == [], "imports of a name from a module that only imports it"


def exported_but_not_defined(path: Path) -> list[str]:
    """Names an `__all__` of `path` lists that `path` does not define (it only imports them)."""
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            listed = [e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant)]
            return [str(n) for n in listed if n not in defined_names(path)]
    return []


def test_no_module_exports_what_it_imports() -> None:
    problems = everywhere(exported_but_not_defined)
    assert problems == [], "__all__ lists names the module only imports"


def test_a_reexport_is_seen(tmp_path: Path) -> None:
    importer = tmp_path / "importer.py"
    # dgm.config.loader imports PipelineConfig from its home, dgm.config.pipelines.
    importer.write_text(
        "from dgm.config.loader import load_config, PipelineConfig\n"
        "from dgm.config import loader\n"
        "from dgm.config.pipelines import PipelineConfig as P\n"
    )
    assert reexported_imports(importer) == ["1: dgm.config.loader.PipelineConfig"]
    exporter = tmp_path / "exporter.py"
    exporter.write_text("from os import sep\nHERE = 1\n__all__ = ['HERE', 'sep']\n")
    assert exported_but_not_defined(exporter) == ["sep"]
