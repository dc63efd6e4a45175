"""`python -m lab.streams --bootstrap HOST:PORT --guarantee exactly_once_v2 [...]`: one run of
the Kafka Streams application through SIGKILLs; prints the JSON report on stdout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

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
    parser.add_argument("--messages", type=int, default=3000, help="source records")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s (0 = no limit)")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs of the application")
    parser.add_argument("--commit-interval-ms", type=int, help="default: Kafka Streams' own")
    parser.add_argument("--lab-dir", default="lab-runs", help="where each run gets a folder")
    parser.add_argument("--seed", type=int, help="seed of the random kill moments")
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
        seed=args.seed,
    )
    problems = settings.problems()
    if problems:
        parser.error("; ".join(problems))
    report = run_streams_lab(settings)
    print(report.to_json())
    return 0 if report.caught_up else 1


if __name__ == "__main__":
    sys.exit(main())
