"""`python -m lab.console --bootstrap HOST:PORT [...]`: one run of Kafka's console consumer piped
into its console producer through SIGKILLs; prints the JSON report on stdout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.console.run import ConsoleLabSettings, run_console_lab
from lab.runner import add_folder_options, add_production_options, run_and_print


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.console")
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    add_production_options(parser, "the relay")
    parser.add_argument(
        "--auto-commit-interval-ms", type=int, default=1500, help="the console consumer's"
    )
    parser.add_argument(
        "--stamp-headers", action="store_true", help="the source records carry dgm headers"
    )
    parser.add_argument(
        "--share-group",
        action="store_true",
        help="the consumer is Kafka's console share consumer, in a share group (Kafka 4.2+)",
    )
    add_folder_options(parser, "kill moments")
    args = parser.parse_args(argv)
    settings = ConsoleLabSettings(
        bootstrap_servers=args.bootstrap,
        lab_dir=Path(args.lab_dir),
        messages=args.messages,
        rate=args.rate or None,
        kills=args.kills,
        auto_commit_interval_ms=args.auto_commit_interval_ms,
        stamp_headers=args.stamp_headers,
        share_group=args.share_group,
        seed=args.seed,
    )
    report = run_and_print(parser, settings, run_console_lab)
    return 0 if report.caught_up else 1


if __name__ == "__main__":
    sys.exit(main())
