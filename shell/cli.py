"""The `dgm` command line: a thin layer that parses arguments and calls the stages."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from dgm import __version__
from dgm.util.command_line import CONFIG_HELP, CommandParser, Handler, config_path
from dgm.util.errors import UserFacingError


def build_parser() -> argparse.ArgumentParser:
    """Every `dgm` subcommand; each sets `handler` to the function that runs it."""
    parser = argparse.ArgumentParser(
        prog="dgm",
        description="Delivery Guarantee Monitor: which delivery guarantee your Kafka "
        "pipelines actually achieve, with the evidence.",
    )
    parser.add_argument("--version", action="version", version=f"dgm {__version__}")
    parser.add_argument("--config", help=CONFIG_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=CommandParser
    )

    from shell.broker_command import register as register_broker

    register_broker(commands)
    from shell.collect_command import register as register_collect

    register_collect(commands)
    from shell.lab_command import register as register_lab

    register_lab(commands)
    from shell.watch_command import register as register_watch

    register_watch(commands)
    from shell.analyze_command import register as register_analyze

    register_analyze(commands)
    from shell.verdicts_command import register as register_verdicts

    register_verdicts(commands)
    from shell.alerts_command import register as register_alerts

    register_alerts(commands)
    from shell.dashboard_command import register as register_dashboard

    register_dashboard(commands)
    from shell.exporter_command import register as register_exporter

    register_exporter(commands)
    from shell.run_command import register as register_run

    register_run(commands)
    from shell.demo_command import register as register_demo

    register_demo(commands)
    from shell.check_command import register as register_check

    register_check(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.config = config_path(args)  # every command reads args.config
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except UserFacingError as error:
        print(f"dgm: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
