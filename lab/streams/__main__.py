"""`python -m lab.streams --bootstrap HOST:PORT --guarantee exactly_once_v2 [...]`: one run of
the Kafka Streams application through SIGKILLs; prints the JSON report on stdout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.runner import add_folder_options, add_production_options, run_and_print
from lab.streams.app import GUARANTEES
from lab.streams.run import StreamsLabSettings, run_streams_lab


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.streams")
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--guarantee", required=True, choices=GUARANTEES)
    parser.add_argument(
        "--drop-every-tenth",
        action="store_true",
        help="the application drops every record whose JSON field n is a multiple of 10",
    )
    add_production_options(parser, "the application")
    parser.add_argument(
        "--no-headers", action="store_true", help="the source records carry no dgm header"
    )
    parser.add_argument("--commit-interval-ms", type=int, help="default: Kafka Streams' own")
    add_folder_options(parser, "kill moments")
    args = parser.parse_args(argv)
    settings = StreamsLabSettings(
        bootstrap_servers=args.bootstrap,
        lab_dir=Path(args.lab_dir),
        guarantee=args.guarantee,
        drop_every_tenth=args.drop_every_tenth,
        messages=args.messages,
        rate=args.rate or None,
        kills=args.kills,
        commit_interval_ms=args.commit_interval_ms,
        stamp_headers=not args.no_headers,
        seed=args.seed,
    )
    report = run_and_print(parser, settings, run_streams_lab)
    return 0 if report.caught_up else 1


if __name__ == "__main__":
    sys.exit(main())
