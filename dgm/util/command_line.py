"""What the `dgm` subcommands share: the parser class, the config path, argument types, the
default ports of the servers, and the status line. The commands themselves live in `shell/`."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import Any

from dgm.config.loader import ENV_CONFIG

Handler = Callable[[argparse.Namespace], int]

CONFIG_HELP = f"path to dgm.toml (default: ${ENV_CONFIG}, else ./dgm.toml if present)"
DASHBOARD_PORT = 8501  # `dgm dashboard`, and the dashboard of `dgm run` and `dgm demo`
EXPORTER_PORT = 9598  # `dgm exporter`, and the exporter of `dgm run` and `dgm demo`


class CommandParser(argparse.ArgumentParser):
    """The parser of every subcommand, at any depth (`dgm collect`, `dgm broker start`): it
    accepts --config after the subcommand as well as before it. SUPPRESS leaves the value
    given before the subcommand in place when there is none after it. Commands do not declare
    --config themselves (argparse would refuse the second one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--config", default=argparse.SUPPRESS, help=CONFIG_HELP)
        # -v after the subcommand too (`dgm verdicts -v`); SUPPRESS keeps one given before it.
        self.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging"
        )


def config_path(args: argparse.Namespace) -> str | None:
    """--config (before or after the subcommand), else $DGM_CONFIG, else None (./dgm.toml)."""
    given: str | None = getattr(args, "config", None)
    return given or os.environ.get(ENV_CONFIG) or None


def say(line: str) -> None:
    """A status line of a long-running command, on stderr (stdout stays for results)."""
    print(line, file=sys.stderr, flush=True)


def seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def port_number(text: str) -> int:
    """A TCP port, 1..65535 (argparse type)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"expected a port in 1..65535, got {port}")
    return port


def add_listen_arguments(parser: argparse.ArgumentParser, default_port: int) -> None:
    """--port and --host of a server command; loopback unless told otherwise."""
    parser.add_argument(
        "--port", type=port_number, default=default_port, help=f"port (default {default_port})"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; 0.0.0.0 exposes it to the network)",
    )


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """--host, --port and --exporter-port of the commands that run the whole stack (`dgm run`,
    `dgm demo`): the dashboard's address and the exporter's port beside it."""
    parser.add_argument("--host", default="127.0.0.1", help="dashboard address (default 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=port_number,
        default=DASHBOARD_PORT,
        help=f"dashboard port (default {DASHBOARD_PORT})",
    )
    parser.add_argument(
        "--exporter-port",
        type=port_number,
        default=EXPORTER_PORT,
        help=f"Prometheus exporter port, on --host (default {EXPORTER_PORT})",
    )


def add_loop_arguments(parser: argparse.ArgumentParser, unit: str, interval_key: str) -> None:
    """--once, --interval and --bootstrap of a command that repeats its work (`dgm collect`,
    `dgm analyze`)."""
    parser.add_argument("--once", action="store_true", help=f"one {unit}, then exit")
    parser.add_argument(
        "--interval", type=seconds, help=f"seconds between {unit}s (default: {interval_key})"
    )
    parser.add_argument("--bootstrap", help="host:port[,...] (default: from dgm.toml)")
