"""Every repository path the docs and the code's comments name exists.

Scanned: the Markdown files of the repository (not bench/HISTORY.md: a dated record keeps
the paths of its day), and the comments and docstrings of the Python files of every
top-level package, tests/ and bench/. What counts as a path:

- in Markdown, a relative link target (`[text](docs/design.md)`, resolved from the file's
  own folder, as a renderer does) and every word of a backticked span outside fenced code;
- in Python, every word of a backticked span and every bare word that contains a `/` and
  ends in one of EXTENSIONS (comments rarely backtick a path).

A word with a `/` whose first part is a top-level entry of the repository must exist from
the root (a test id's `::name` and a link's `#anchor` are cut off). A word with a `/` and
one of EXTENSIONS whose first folder is a folder of the repository, but not a top-level one
(a module's page in dashboard/ citing its sibling folder), must exist from the citing file's
folder or one of its parents. A bare file name with one of EXTENSIONS must be the name of
some file in the repository, unless it is in NOT_REPOSITORY_FILES. Not paths, so skipped:
URLs, globs and placeholders (`*`, `?`, `<`, `{`, `$`, `[`, `~`, `=`), absolute paths,
options, state folders (a leading `.`), words without an extension that start elsewhere
(`topic/partition/offset`) and paths in other projects (their first folder is none of ours).

A citation of a section, a Markdown file followed by quoted titles (`"A"` or `"A" and "B"`),
must name a heading or a bold term of that file: one that starts with the quoted words
(whitespace collapsed, the multiplication sign read as `x`, a trailing `...` dropped).
"""

from __future__ import annotations

import ast
import functools
import io
import os
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTENSIONS = (".py", ".md", ".toml", ".yml", ".yaml", ".lock", ".json", ".txt", ".sh", ".png")
# Hidden top-level entries that are part of the repository (others are state or tooling).
HIDDEN_ENTRIES = (".ci", ".github", ".dockerignore", ".gitignore")
# File names that are not the repository's: the user's config, a state directory's
# manifest, Kafka's tools.
NOT_REPOSITORY_FILES = frozenset({"dgm.toml", "_range.json", "kafka-transactions.sh"})
# A dated record names files as they were on the day of each entry; this file's own
# docstring and examples name missing paths on purpose.
UNCHECKED = frozenset({"bench/HISTORY.md", "tests/test_doc_paths.py"})
SKIPPED_DIRS = frozenset({"build", "dist", "node_modules", "spark-warehouse", "metastore_db"})
NOT_A_PATH = set("*?<>{}$[]~=|@")

_FENCE = re.compile(r"^\s*(```|~~~)")
_BACKTICKED = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_BARE_PATH = re.compile(
    r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+(?:" + "|".join(re.escape(e) for e in EXTENSIONS) + r"))"
    r"(?![\w/-])"
)
_SECTION = re.compile(r'([\w./-]+\.md),?\s+((?:"[^"]+"(?:,\s*|\s+and\s+)?)+)')
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.MULTILINE)
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


@dataclass(frozen=True)
class Passage:
    """Text of one file that may cite paths: a Markdown paragraph, a comment block or a
    docstring, with the line it starts on."""

    source: str  # repository-relative, with /
    line: int
    text: str
    markdown: bool


def top_level_entries(root: Path = ROOT) -> frozenset[str]:
    return frozenset(
        entry.name
        for entry in root.iterdir()
        if not entry.name.startswith(".") or entry.name in HIDDEN_ENTRIES
    )


def repository_files(root: Path = ROOT) -> list[Path]:
    """Every file, without hidden folders, build output and caches."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith((".", "__")) and d not in SKIPPED_DIRS and "egg-info" not in d
        )
        found.extend(Path(folder) / name for name in sorted(files))
    return found


def checked_files(root: Path = ROOT) -> list[Path]:
    """The Markdown files, and the Python files of the top-level packages, tests and bench."""
    folders = tuple(
        entry.name
        for entry in root.iterdir()
        if (entry / "__init__.py").is_file() or entry.name in ("tests", "bench")
    )
    chosen = []
    for path in repository_files(root):
        relative = path.relative_to(root).as_posix()
        if relative in UNCHECKED:
            continue
        if path.suffix == ".md" or (path.suffix == ".py" and relative.startswith(folders)):
            chosen.append(path)
    return chosen


def markdown_passages(source: str, text: str) -> Iterator[Passage]:
    """Paragraphs outside fenced code blocks."""
    fenced = False
    lines: list[str] = []
    start = 1
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.strip():
            if not lines:
                start = number
            lines.append(line)
        elif lines:
            yield Passage(source, start, "\n".join(lines), markdown=True)
            lines = []


def python_passages(source: str, text: str) -> Iterator[Passage]:
    """Comment blocks (consecutive comment lines joined) and docstrings."""
    block: list[str] = []
    start = last = 0
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.COMMENT:
            continue
        row = token.start[0]
        if block and row != last + 1:
            yield Passage(source, start, "\n".join(block), markdown=False)
            block = []
        if not block:
            start = row
        block.append(token.string.lstrip("#").strip())
        last = row
    if block:
        yield Passage(source, start, "\n".join(block), markdown=False)
    for node in _definitions(ast.parse(text)):
        docstring = ast.get_docstring(node, clean=False)
        if docstring:
            yield Passage(source, getattr(node, "lineno", 1), docstring, markdown=False)


Definition = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def _definitions(node: ast.AST) -> Iterator[Definition]:
    """The module, classes and functions: what may have a docstring (statements only are
    walked, so this is quicker than ast.walk)."""
    if isinstance(node, Definition):
        yield node
    for field in ("body", "orelse", "finalbody", "handlers"):
        for child in getattr(node, field, ()):
            if isinstance(child, ast.stmt | ast.excepthandler):
                yield from _definitions(child)


def candidates(passage: Passage) -> Iterator[tuple[str, bool]]:
    """(word, is a link target) for every word of the passage that may be a path."""
    for span in _BACKTICKED.findall(passage.text):
        for word in span.split():
            yield word, False
    if passage.markdown:
        for target in _LINK.findall(passage.text):
            yield target, True
    else:
        for word in _BARE_PATH.findall(_BACKTICKED.sub(" ", passage.text)):
            yield word, False


def _cleaned(word: str) -> str:
    word = word.strip("\"'(),;")
    word = word.split("::")[0].split("#")[0]
    word = re.sub(r":\d+$", "", word)
    return word.rstrip(".:")


@dataclass(frozen=True)
class Tree:
    """What a cited path is checked against."""

    root: Path
    top: frozenset[str]  # top-level entries
    folders: frozenset[str]  # names of every folder
    names: frozenset[str]  # names of every file

    @classmethod
    def of(cls, root: Path) -> Tree:
        files = repository_files(root)
        parents = {parent for path in files for parent in path.relative_to(root).parents}
        return cls(
            root,
            top_level_entries(root),
            frozenset(parent.name for parent in parents if parent.name),
            frozenset(path.name for path in files),
        )


def missing(word: str, source: str, link: bool, tree: Tree) -> str | None:
    """The path `word` names when it names one that does not exist, else None."""
    if link and re.match(r"[a-z][a-z0-9+.-]*:", word):  # https:, mailto:
        return None
    word = _cleaned(word)
    if (
        not word
        or "://" in word
        or NOT_A_PATH & set(word)
        or (word.startswith(("/", "-", ".")) and not word.startswith(HIDDEN_ENTRIES))
    ):
        return None
    root = tree.root
    folder = (root / source).parent
    if link:
        return None if (folder / word).exists() else word
    path = word.rstrip("/")
    if "/" in path:
        first = path.split("/")[0]
        if first in tree.top:
            return None if (root / path).exists() else path
        if not path.endswith(EXTENSIONS) or first not in tree.folders:
            return None
        bases = [folder, *folder.parents]
        found = any((base / path).exists() for base in bases if base.is_relative_to(root))
        return None if found else path
    if not path.endswith(EXTENSIONS) or path in NOT_REPOSITORY_FILES:
        return None
    return None if path in tree.names or (root / path).exists() else path


def _normalized(title: str) -> str:
    title = " ".join(title.replace("\N{MULTIPLICATION SIGN}", "x").split())
    return title.removesuffix("...").removesuffix("…").strip()


def bad_sections(passage: Passage, root: Path) -> Iterator[str]:
    """`some.md, "Title"` citations whose Title is no heading of some.md."""
    text = " ".join(passage.text.split())
    for cited, titles in _SECTION.findall(text):
        candidates = [root / cited, (root / passage.source).parent / cited]
        target = next((path for path in candidates if path.is_file()), None)
        if target is None:
            continue  # a missing file is reported as a path
        text = target.read_text(encoding="utf-8")
        headings = [_normalized(h) for h in (*_HEADING.findall(text), *_BOLD.findall(text))]
        for title in re.findall(r'"([^"]+)"', titles):
            if not any(heading.startswith(_normalized(title)) for heading in headings):
                yield f'{cited}, "{title}"'


def problems_in(passages: list[Passage], root: Path = ROOT) -> list[str]:
    tree = Tree.of(root)
    found: list[str] = []
    for passage in passages:
        where = f"{passage.source}:{passage.line}"
        seen: set[str] = set()
        for word, link in candidates(passage):
            path = missing(word, passage.source, link, tree)
            if path is not None and path not in seen:
                seen.add(path)
                found.append(f"{where}: {path} does not exist")
        found.extend(f"{where}: no section {cited}" for cited in bad_sections(passage, root))
    return found


@functools.cache
def all_passages(root: Path = ROOT) -> list[Passage]:
    passages: list[Passage] = []
    for path in checked_files(root):
        source, text = path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")
        read = markdown_passages if path.suffix == ".md" else python_passages
        passages.extend(read(source, text))
    return passages


def test_every_cited_path_exists() -> None:
    problems = problems_in(all_passages())
    assert not problems, "paths and sections the docs or comments cite are gone:\n" + "\n".join(
        problems
    )


def test_the_scan_covers_docs_comments_and_docstrings() -> None:
    sources = {passage.source for passage in all_passages()}
    assert {"README.md", "docs/design.md", "bench/README.md", "dgm/config/pipelines.py"} <= sources
    assert "bench/HISTORY.md" not in sources
    assert any(source.startswith("tests/") for source in sources)


def test_a_missing_path_is_caught_and_non_paths_are_not(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "views").mkdir(parents=True)
    (tmp_path / "pkg" / "views" / "page.py").write_text("")
    (tmp_path / "pkg" / "queries.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## Scale: 3\N{MULTIPLICATION SIGN} faster\n"
    )
    markdown = (
        "See `pkg/queries.py`, `pkg/tables.py` and [the guide](docs/guide.md), "
        "[gone](docs/gone.md), [site](https://example.com/x.md).\n"
        "Run `python pkg/queries.py --once /tmp/x.py` or `pytest pkg/views/page.py::test_x`;\n"
        "not paths: `topic/partition/offset`, `<state_dir>/samples/*.parquet`, `~/.cache/dgm`,\n"
        "`.dgm-demo/dgm.toml`, `dgm.toml`, `http://127.0.0.1:8501/topic`, `per_id.py`.\n"
        'Sections: docs/guide.md, "Scale: 3x faster" and "Nowhere".\n'
    )
    comment = (
        "# reads the contract (pkg/contract.py) and views/page.py, not views/gone.py,\n"
        "# and Alertmanager's api/v2/openapi.yaml;\n"
        '# the queries in `queries.py`; see docs/guide.md, "Scale:\n# 3x faster".\nx = 1\n'
    )
    passages = [
        *markdown_passages("README.md", markdown),
        *python_passages("pkg/module.py", comment),
    ]
    problems = problems_in(passages, tmp_path)
    assert problems == [
        "README.md:1: pkg/tables.py does not exist",
        "README.md:1: per_id.py does not exist",
        "README.md:1: docs/gone.md does not exist",
        'README.md:1: no section docs/guide.md, "Nowhere"',
        "pkg/module.py:1: pkg/contract.py does not exist",
        "pkg/module.py:1: views/gone.py does not exist",
    ]
