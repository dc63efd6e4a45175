"""`dgm dashboard`: the streamlit command line and environment it runs with."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from dgm.config.loader import load_config
from dgm.util.command_line import CommandParser
from shell.dashboard_command import app_path, register, streamlit_command, streamlit_env


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="dgm")
    parser.add_argument("--config")
    register(parser.add_subparsers(dest="command", required=True, parser_class=CommandParser))
    return parser.parse_args(list(argv))


def test_binds_loopback_unless_told_otherwise() -> None:
    args = _parse("dashboard")
    assert (args.host, args.port, args.config) == ("127.0.0.1", 8501, None)
    command = streamlit_command(args.host, args.port)
    assert command[:5] == [sys.executable, "-m", "streamlit", "run", str(app_path())]
    flags = dict(zip(command[5::2], command[6::2], strict=True))
    assert flags["--server.address"] == "127.0.0.1"
    assert flags["--server.port"] == "8501"
    assert flags["--server.headless"] == "true"
    assert flags["--browser.gatherUsageStats"] == "false"
    assert _parse("dashboard", "--host", "0.0.0.0", "--port", "9000").host == "0.0.0.0"


def test_global_config_survives_the_subcommand() -> None:
    assert _parse("--config", "x.toml", "dashboard").config == "x.toml"
    assert _parse("dashboard", "--config", "y.toml").config == "y.toml"


def test_bad_port_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse("dashboard", "--port", "70000")
    assert "1..65535" in capsys.readouterr().err


def test_app_is_inside_the_installed_package() -> None:
    assert app_path().is_file() and app_path().parent.name == "dashboard"


def test_env_names_the_config_and_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DGM_STATE_DIR", raising=False)
    (tmp_path / "dgm.toml").write_text('state_dir = "state"\n')
    config = load_config(tmp_path / "dgm.toml")
    env = streamlit_env(config, {"PATH": "/bin", "DGM_CONFIG": "stale.toml"})
    assert env == {
        "PATH": "/bin",
        "DGM_CONFIG": str(tmp_path / "dgm.toml"),
        "DGM_STATE_DIR": str(tmp_path / "state"),
    }


def test_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shell.dashboard_command", "--help"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "usage: dgm dashboard" in done.stdout and "--port" in done.stdout
