"""`dgm dashboard`: serve the Streamlit dashboard over `<state_dir>/dgm.duckdb`.

Binds 127.0.0.1 unless told otherwise. The dashboard finds dgm.toml and the state directory
through DGM_CONFIG and DGM_STATE_DIR, which this command sets from its own config. Also
runnable on its own: `python -m shell.dashboard_command [--config F] [--port P] [--host H]`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dashboard
from dgm.config.document import DgmConfig
from dgm.config.loader import ENV_CONFIG, ENV_STATE_DIR, load_config
from dgm.util.command_line import (
    CONFIG_HELP,
    DASHBOARD_PORT,
    CommandParser,
    add_listen_arguments,
    config_path,
)
from dgm.util.errors import UserFacingError


def app_path() -> Path:
    """The entry script inside the installed `dashboard` package."""
    return Path(dashboard.__file__).parent / "app.py"


def register(commands: Any) -> None:
    serve = commands.add_parser(
        "dashboard",
        help="serve the web dashboard over the published analysis",
        description="Runs the Streamlit dashboard over <state_dir>/dgm.duckdb, the tables "
        "`dgm analyze` publishes. It only reads them. Binds 127.0.0.1 unless --host says "
        "otherwise; stop it with Ctrl-C.",
    )
    add_listen_arguments(serve, DASHBOARD_PORT)
    serve.set_defaults(handler=_dashboard)


def streamlit_command(host: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app_path()),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "viewer",
    ]


def streamlit_env(config: DgmConfig, base: Mapping[str, str]) -> dict[str, str]:
    """`base` plus the config file and state directory, absolute, for the dashboard."""
    env = dict(base)
    if config.source is not None:
        env[ENV_CONFIG] = str(Path(config.source).absolute())
    else:
        env.pop(ENV_CONFIG, None)
    env[ENV_STATE_DIR] = str(Path(config.state_dir).absolute())
    return env


def _dashboard(args: argparse.Namespace) -> int:
    config = load_config(getattr(args, "config", None))
    command = streamlit_command(args.host, args.port)
    env = streamlit_env(config, os.environ)
    print(f"dgm dashboard on http://{args.host}:{args.port} over {config.state_dir}", flush=True)
    try:
        # Streamlit replaces this process: signals (Ctrl-C, SIGTERM) reach it directly.
        os.execve(sys.executable, command, env)
    except OSError as error:
        raise UserFacingError(f"cannot start streamlit: {error}") from None
    return 0  # not reached


def main(argv: Sequence[str] | None = None) -> int:
    """`dgm dashboard ...` without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="dgm")
    parser.add_argument("--config", help=CONFIG_HELP)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    register(commands)
    args = parser.parse_args(["dashboard", *(sys.argv[1:] if argv is None else argv)])
    args.config = config_path(args)
    try:
        handler = args.handler
        result: int = handler(args)
        return result
    except UserFacingError as error:
        print(f"dgm: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
