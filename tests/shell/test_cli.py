"""The `dgm` command line: --config anywhere, DGM_CONFIG, and `dgm verdicts`' exit codes."""

from __future__ import annotations

import argparse
import json
import re
import shlex
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dgm.util.command_line import config_path
from shell.cli import build_parser, main
from shell.demo_command import other_shell_commands
from tests.support.published_rows import publish, verdict


@pytest.fixture(autouse=True)
def _no_env_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DGM_CONFIG", "DGM_STATE_DIR", "DGM_BOOTSTRAP"):
        monkeypatch.delenv(name, raising=False)


def leaf_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(['broker', 'start'], its parser) for every command that takes no further command."""
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield path, parser
    for action in subcommands:
        for name, child in action.choices.items():
            yield from leaf_commands(child, (*path, name))


def test_every_command_accepts_config_after_it() -> None:
    leaves = dict(leaf_commands(build_parser()))
    assert {("collect",), ("verdicts",), ("broker", "start"), ("alerts", "list")} <= set(leaves)
    for path, parser in leaves.items():
        assert "--config" in parser._option_string_actions, " ".join(path)


@pytest.mark.parametrize(
    "argv",
    [
        ["collect", "--config", "F.toml", "--once"],
        ["verdicts", "--config", "F.toml"],
        ["verdicts", "--json", "--config", "F.toml"],
        ["--config", "F.toml", "verdicts"],
        ["--config", "other.toml", "analyze", "--config", "F.toml", "--once"],
        ["broker", "status", "--config", "F.toml"],
        ["alerts", "list", "--config", "F.toml"],
        ["dashboard", "--config", "F.toml", "--port", "9000"],
        ["run", "--config", "F.toml", "--no-dashboard"],
    ],
)
def test_config_parses_before_or_after_the_command(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert config_path(args) == "F.toml"  # after the command wins over before it


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["verdicts"], False),
        (["-v", "verdicts"], True),
        (["verdicts", "-v"], True),
        (["broker", "status", "--verbose"], True),
        (["collect", "--once", "-v"], True),
    ],
)
def test_verbose_parses_before_or_after_the_command(argv: list[str], verbose: bool) -> None:
    assert build_parser().parse_args(argv).verbose is verbose


def test_dgm_config_is_read_when_no_flag_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = build_parser()
    assert config_path(parser.parse_args(["verdicts"])) is None
    monkeypatch.setenv("DGM_CONFIG", "env.toml")
    assert config_path(parser.parse_args(["verdicts"])) == "env.toml"
    assert config_path(parser.parse_args(["collect", "--once"])) == "env.toml"
    assert config_path(parser.parse_args(["verdicts", "--config", "F.toml"])) == "F.toml"


def test_every_command_reads_dgm_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DGM_CONFIG", str(tmp_path / "missing.toml"))
    assert main(["verdicts"]) == 2
    assert "config file not found" in capsys.readouterr().err
    assert main(["alerts", "list"]) == 2
    assert str(tmp_path / "missing.toml") in capsys.readouterr().err


# --- dgm verdicts: violations and stale publications -----------------------------------------


def published(tmp_path: Path, age_s: float, run_s: float = 0, **values: object) -> Path:
    (tmp_path / "dgm.toml").write_text('state_dir = "state"\n[analysis]\ninterval_s = 30\n')
    finished = datetime.now(UTC) - timedelta(seconds=age_s)
    run = {"finished_at": finished, "started_at": finished - timedelta(seconds=run_s)}
    publish(tmp_path / "state", {"verdicts": [verdict("orders", **values)], "runs": [run]})
    return tmp_path / "dgm.toml"


def test_a_fresh_publication_exits_0_or_1_for_a_violation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = published(tmp_path, age_s=10)
    assert main(["verdicts", "--config", str(config)]) == 0
    assert "orders" in capsys.readouterr().out
    config = published(tmp_path, age_s=10, meets_declared=False)
    assert main(["verdicts", "--config", str(config)]) == 1
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("flags", [[], ["--json"]])
def test_a_stale_publication_exits_3_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    # interval_s = 30, runs of 0 s: stale after max(3 x (30 + 0), 60) = 90 s.
    fresh = published(tmp_path, age_s=80, meets_declared=False)
    assert main(["verdicts", *flags, "--config", str(fresh)]) == 1
    assert "stale" not in capsys.readouterr().err
    stale = published(tmp_path, age_s=600, meets_declared=False)
    assert main(["verdicts", *flags, "--config", str(stale)]) == 3
    captured = capsys.readouterr()
    assert re.search(r"stale: the last analysis finished 6\d\d s ago, more than 90 s", captured.err)
    if flags:
        document = json.loads(captured.out)
        assert document["stale"] is True and document["age_s"] >= 600
        assert document["pipelines"][0]["pipeline"] == "orders"


def test_a_slow_analysis_is_not_called_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Runs of 100 s, every 30 s: they finish 130 s apart, stale after 3 x 130 = 390 s (the
    # threshold of the dashboard and the exporter too).
    slow = published(tmp_path, age_s=300, run_s=100)
    assert main(["verdicts", "--config", str(slow)]) == 0
    assert "stale" not in capsys.readouterr().err
    behind = published(tmp_path, age_s=400, run_s=100)
    assert main(["verdicts", "--config", str(behind)]) == 3
    assert "more than 390 s (3 x (analysis.interval_s + the run's 100 s)" in (
        capsys.readouterr().err
    )


# --- dgm demo: reaching it from another shell --------------------------------------------------


def test_the_demo_prints_commands_that_reach_its_config(tmp_path: Path) -> None:
    config = tmp_path / "a demo dir" / "dgm.toml"
    verdicts, alerts, export = other_shell_commands(config)
    for line in (verdicts, alerts):
        argv = shlex.split(line)
        assert argv[0] == "dgm"
        assert config_path(build_parser().parse_args(argv[1:])) == str(config)
    assert shlex.split(export, comments=True) == ["export", f"DGM_CONFIG={config}"]
