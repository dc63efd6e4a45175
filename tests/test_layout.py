"""Imports run one way (docs/design.md, "Layout"): core <- stages <- shell; the lab and the
embedded broker (a tool) beside; no import cycle; commands are registered in the shell only.
Tests and benchmarks take their helpers from tests/support only (never from a test module or
a conftest, whose fixtures reach tests by name), and import it without editing sys.path.

Reads every module's imports from its AST (including imports inside functions, which are
still dependencies) and checks each against the layer rules below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = "dgm"
STAGES = ("collectors", "spark_jobs", "alerts", "dashboard", "exporter", "watch")
SHELL = "shell"
LAB = "lab"
# The embedded broker: a real Kafka for the demo, the lab and the tests. It stands on the core;
# the shell (`dgm broker`, `dgm demo`, the embedded cluster as the default one) and the lab (its
# faults restart brokers) use it. The core and the stages never do: they monitor whatever
# cluster they are given, and the shell decides which.
TOOL = "embedded_kafka"
# The embedded schema registry, the same kind of tool: it reuses the broker's pinned downloads.
REGISTRY_TOOL = "embedded_registry"
PACKAGES = (CORE, *STAGES, TOOL, REGISTRY_TOOL, SHELL, LAB)
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
        return "the core imports no stage, tool, the shell or the lab"
    if src in STAGES:
        return None if dst == CORE else f"stage {src} imports {dst}"
    if src == TOOL:
        return None if dst == CORE else f"the embedded broker imports {dst}: it is a tool"
    if src == REGISTRY_TOOL:
        ok = dst in (CORE, TOOL)
        return None if ok else f"the embedded registry imports {dst}: it is a tool"
    if src == LAB:
        ok = dst in (CORE, TOOL, REGISTRY_TOOL)
        return None if ok else f"the lab imports {dst}: it stands on the core and the tools"
    return None  # the shell may import the core, every stage and the tool


def product_modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Product module -> the product modules it imports (names that are not modules dropped)."""
    paths = {module_name(path): path for path in product_modules()}
    return {name: imported_modules(path) & paths.keys() for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or a module importing
    itself (Tarjan's algorithm): every import cycle is inside one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for next_ in sorted(graph.get(node, ())):
            if next_ not in index:
                visit(next_)
                low[node] = min(low[node], low[next_])
            elif next_ in stack:
                low[node] = min(low[node], index[next_])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def command_wiring(path: Path) -> list[str]:
    """Where `path` registers a command: a function named `register`, or a call of
    `.add_parser(...)` / `.add_subparsers(...)`, as `line: what`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "register":
            found.append(f"{node.lineno}: def register")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("add_parser", "add_subparsers")
        ):
            found.append(f"{node.lineno}: .{node.func.attr}(...)")
    return found


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


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "d"}, "e": set[str]()}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["d"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_commands_are_registered_in_the_shell_only() -> None:
    """docs/design.md, "Layout": every subcommand's parser is added by a `register` function
    of a `shell/*_command.py` module (shell/cli.py holds the top-level subparsers)."""
    problems = []
    for path in product_modules():
        name = module_name(path)
        if top(name) == SHELL and (path.name.endswith("_command.py") or name == "shell.cli"):
            continue
        problems += [f"{name}:{where}" for where in command_wiring(path)]
    assert problems == []


def test_command_wiring_is_seen() -> None:
    assert command_wiring(ROOT / "shell" / "collect_command.py") != []
    assert any("add_subparsers" in where for where in command_wiring(ROOT / "shell" / "cli.py"))


@pytest.mark.parametrize(
    ("importer", "imported", "allowed"),
    [
        ("collectors.cycle", "dgm.contracts.samples", True),
        ("collectors.cycle", "spark_jobs.job", False),
        ("spark_jobs.job", "alerts.run", False),
        ("dashboard.app", "alerts.evaluate", False),
        ("dgm.config", "collectors.cycle", False),
        ("dgm.config", "shell.cli", False),
        ("dgm.config", "lab.run", False),
        ("spark_jobs.audit.record_columns", "lab.ledger", False),
        ("alerts.run", "tests.reference", False),
        ("shell.lab_command", "lab.run", True),
        ("shell.cli", "lab.run", False),
        ("shell.run_command", "lab.continuous", False),
        ("shell.analyze_command", "alerts.run", True),
        ("lab.run", "embedded_kafka.cluster", True),
        ("lab.run", "collectors.cycle", False),
        ("shell.broker_command", "embedded_kafka.cluster", True),
        ("shell.connection", "embedded_kafka.cluster", True),
        ("embedded_kafka.cluster", "dgm.util.ports", True),
        ("embedded_kafka.cluster", "collectors.cycle", False),
        ("embedded_kafka.cluster", "shell.cli", False),
        ("embedded_kafka.cluster", "lab.run", False),
        ("embedded_registry.server", "embedded_kafka.jar_cache", True),
        ("embedded_registry.server", "collectors.cycle", False),
        ("collectors.cycle", "embedded_registry.server", False),
        ("watch.ids", "embedded_registry.server", False),
        ("dgm.config", "embedded_kafka.cluster", False),
        ("collectors.cycle", "embedded_kafka.cluster", False),
        ("exporter.server", "embedded_kafka.cluster", False),
        ("dashboard.app", "dgm.util.command_line", True),
    ],
)
def test_rules(importer: str, imported: str, allowed: bool) -> None:
    assert (violation(importer, imported) is None) is allowed


def test_relative_and_from_imports_are_seen(tmp_path: Path) -> None:
    # The checker must see `from pkg import module` and imports inside functions.
    path = ROOT / "dgm" / "contracts" / "published.py"
    assert "duckdb" in imported_modules(path)
    names = imported_modules(ROOT / "shell" / "collect_command.py")
    assert any(top(n) == "collectors" for n in names)


# --- Test support: helpers live in tests/support; conftest files hold fixtures and hooks

SUPPORT = "tests.support"
# Where tests' helpers are imported: the tests themselves and the benchmarks.
SUPPORT_USERS = ("tests", "bench")
# sys.path edits that load no project code: analyze_scale imports a copy of spark_jobs as
# committed at an older revision (under another name) from a temporary folder.
PATH_EDITS_ALLOWED = frozenset({"bench/analyze_scale.py"})


def support_violation(imported: str) -> str | None:
    """Why a module of tests/ or bench/ may not import `imported`, or None when it may."""
    if top(imported) != "tests" or imported == "tests":
        return None
    if imported == SUPPORT or imported.startswith(f"{SUPPORT}."):
        return None
    parts = imported.split(".")
    if "conftest" in parts:
        return "a conftest's helpers belong in tests/support (its fixtures reach tests by name)"
    if any(part.startswith("test_") for part in parts):
        return "a test module imports another: move what they share to tests/support"
    return "a helper outside tests/support"


def support_users() -> list[Path]:
    return sorted(p for tree in SUPPORT_USERS for p in (ROOT / tree).rglob("*.py"))


def conftest_helpers(path: Path) -> list[str]:
    """Module-level classes and functions of a conftest.py that are neither fixtures nor
    pytest hooks, as `line: name`."""
    found = []
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.ClassDef):
            found.append(f"{node.lineno}: class {node.name}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            decorators = [ast.unparse(d) for d in node.decorator_list]
            fixture = any(d.split("(")[0] in ("pytest.fixture", "fixture") for d in decorators)
            if not fixture and not node.name.startswith("pytest_"):
                found.append(f"{node.lineno}: def {node.name}")
    return found


def path_edits(path: Path) -> list[str]:
    """Where `path` changes sys.path (`sys.path.insert(...)`, `.append(...)`), as line numbers."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and ast.unparse(node.func.value) == "sys.path"
        ):
            found.append(f"{node.lineno}: sys.path.{node.func.attr}(...)")
    return found


def test_tests_and_benchmarks_import_helpers_from_tests_support_only() -> None:
    problems = []
    for path in support_users():
        flagged = {name for name in imported_modules(path) if support_violation(name)}
        for imported in sorted(flagged):
            if imported.rsplit(".", 1)[0] in flagged:
                continue  # `from tests.x import a` is seen as tests.x and tests.x.a: one line
            why = support_violation(imported)
            problems.append(f"{module_name(path)} imports {imported}: {why}")
    assert problems == []


def test_conftest_files_define_fixtures_and_hooks_only() -> None:
    problems = []
    for path in sorted((ROOT / "tests").rglob("conftest.py")):
        problems += [f"{module_name(path)}:{where}" for where in conftest_helpers(path)]
    assert problems == []


def test_tests_and_benchmarks_leave_sys_path_alone() -> None:
    """Run from the repository root (`python -m pytest`, `python -m bench.NAME`), the project
    and tests/support import as they are."""
    problems = []
    for path in support_users():
        if path.relative_to(ROOT).as_posix() not in PATH_EDITS_ALLOWED:
            problems += [f"{module_name(path)}:{where}" for where in path_edits(path)]
    assert problems == []


@pytest.mark.parametrize(
    ("imported", "allowed"),
    [
        ("tests.support.truth", True),
        ("tests.support.published_world.publish.build", True),
        ("tests.support", True),
        ("tests", True),
        ("dgm.config.loader", True),
        ("tests.conftest", False),
        ("tests.dashboard.conftest.page", False),
        ("tests.alerts.test_webhook", False),
        ("tests.spark_jobs.analyze.test_loss_differential.assert_same", False),
        ("tests.dashboard.published", False),
        ("tests.truth", False),
    ],
)
def test_support_rules(imported: str, allowed: bool) -> None:
    assert (support_violation(imported) is None) is allowed


CONFTEST = """import sys
import pytest

sys.path.insert(0, ".")


@pytest.fixture
def kafka(): ...


@pytest.fixture(scope="session")
def spark(): ...


def pytest_collection_modifyitems(items): ...


def helper(): ...


class Receiver: ...
"""


def test_conftest_helpers_and_path_edits_are_seen(tmp_path: Path) -> None:
    conftest = tmp_path / "conftest.py"
    conftest.write_text(CONFTEST)
    assert conftest_helpers(conftest) == ["18: def helper", "21: class Receiver"]
    assert path_edits(conftest) == ["4: sys.path.insert(...)"]


# --- The vocabulary: verdict, evidence, cause and status words, in dgm/contracts/vocabulary.py

VOCABULARY_MODULE = "dgm/contracts/vocabulary.py"
# Product code that must spell the words through the enums. Not the lab: a reference-pipeline
# package beside the product whose mode names ("at-most-once" as a way to run a pipeline) are
# settings of a pipeline, not verdicts about one.
VOCABULARY_PACKAGES = (CORE, *STAGES, SHELL)
# Words also common in unrelated senses ("none" as a TLS setting, "unknown" for a missing
# value, "WARN" as a log level) are scanned like the others; their unrelated uses, by module:
ALLOWED = frozenset(
    {
        ("dgm/clients/settings.py", "none"),  # ssl.endpoint.identification.algorithm
        ("collectors/cycle.py", "unknown"),  # a timeout the broker does not report
        ("collectors/groups.py", "unknown"),  # a group type without a name
        ("dashboard/views/groups.py", "unknown"),  # a group state not sampled yet
        ("exporter/api.py", "none"),  # "accepted: none" in an error message
        ("shell/dashboard_command.py", "none"),  # Streamlit's server.fileWatcherType
        ("spark_jobs/session.py", "WARN"),  # Spark's log level
        # The config's Literal type (mypy checks dgm.toml with it); tests/dgm/config/test_loader.py
        # holds its words equal to dgm.contracts.vocabulary.DECLARABLE.
        ("dgm/config/pipelines.py", "at-most-once"),
        ("dgm/config/pipelines.py", "at-least-once"),
        ("dgm/config/pipelines.py", "exactly-once"),
        # The claim kinds' Literal; tests/dgm/config/test_loader.py holds it equal to ClaimKind.
        ("dgm/config/pipelines.py", "deadline"),
    }
)


def vocabulary_words() -> frozenset[str]:
    from dgm.contracts import vocabulary as v

    kinds = (
        v.Achieved,
        v.Evidence,
        v.DuplicateCause,
        v.LossCause,
        v.GroupStatus,
        v.Claim,
        v.Anomaly,
    )
    return frozenset(member.value for kind in kinds for member in kind)


def _documentation(tree: ast.AST) -> set[int]:
    """ids of the string constants that stand alone as statements: docstrings (of modules,
    classes, functions, attributes), which explain the words rather than use them."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def vocabulary_literals(source: str, words: frozenset[str]) -> list[tuple[int, str]]:
    """(line, word) of every string constant in `source` that is one of `words`, or holds
    one quoted for SQL ('aborted read'); f-strings' constant parts are constants too."""
    tree = ast.parse(source)
    prose = _documentation(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in prose:
            continue
        text = node.value
        for word in sorted(words):
            if text == word or f"'{word}'" in text:
                found.append((node.lineno, word))
    return found


def vocabulary_offenders() -> list[tuple[str, int, str]]:
    words = vocabulary_words()
    found = []
    for package in VOCABULARY_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = path.relative_to(ROOT).as_posix()
            if module != VOCABULARY_MODULE:
                found += [(module, n, w) for n, w in vocabulary_literals(path.read_text(), words)]
    return found


def test_no_vocabulary_word_is_typed_outside_its_module() -> None:
    """Readers compare with `Achieved.EXACTLY_ONCE`, never with the text "exactly-once".

    A string constant in product code (the core, the stages, the shell) that is exactly one
    of dgm.contracts.vocabulary's words, or holds one quoted for SQL ('insufficient evidence'),
    fails unless allowed by name. Every word is scanned, the generic ones too ("OK", "none",
    "tested", "upstream", "unknown"): as a whole constant they are rare outside the
    vocabulary, and their few unrelated uses are listed in ALLOWED by module. Prose that
    mentions a word inside a longer text (a help line, an error message) is not scanned: it
    is no literal the code compares with, and lists of the words in docs are built from the
    enums (dgm.contracts.vocabulary.listing). Docstrings and comments are not scanned. The lab is
    not
    scanned (see VOCABULARY_PACKAGES).
    """
    allowed = ALLOWED
    offenders = vocabulary_offenders()
    problems = [f"{m}:{n}: {w!r}" for m, n, w in offenders if (m, w) not in allowed]
    assert problems == [], "use the enums of dgm/contracts/vocabulary.py"
    used = {(m, w) for m, _, w in offenders}
    assert sorted(allowed - used) == [], "allowed but not found: remove from the list"


def test_the_vocabulary_scan_catches_a_literal() -> None:
    source = '''
"""A docstring may say exactly-once."""
VERDICT = "exactly-once"
SQL = "SELECT * FROM lost WHERE cause = 'sequence gap'"
PROSE = "a help text may say no guarantee in a sentence"
LABEL = f"{VERDICT} holds"
STATUS = {"STALL": 2}
'''
    words = vocabulary_words()
    assert vocabulary_literals(source, words) == [
        (3, "exactly-once"),
        (4, "sequence gap"),
        (7, "STALL"),
    ]
    assert words >= {"insufficient evidence", "producer retry", "not in sink", "REWIND"}
