"""`python -m lab.txn_copier --bootstrap HOST:PORT --clients-version 4.4.0 [...]`: one run of
the Java transactional copier through SIGKILLs, with the Kafka clients of the given version
(which decides, with the broker, whether it speaks transactions V1 or V2); prints the JSON
report on stdout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from embedded_kafka.kafka_jars import KAFKA_VERSION
from lab.runner import add_folder_options, add_production_options, run_and_print
from lab.txn_copier.run import CopierLabSettings, run_copier_lab


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.txn_copier")
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument(
        "--clients-version",
        default=KAFKA_VERSION,
        help="the Kafka version whose Java clients the copier runs with (a pinned one)",
    )
    parser.add_argument(
        "--abort-percent", type=int, default=20, help="of the copier's transactions, aborted"
    )
    add_production_options(parser, "the copier")
    add_folder_options(parser, "kill moments and aborts")
    args = parser.parse_args(argv)
    settings = CopierLabSettings(
        bootstrap_servers=args.bootstrap,
        lab_dir=Path(args.lab_dir),
        clients_version=args.clients_version,
        messages=args.messages,
        rate=args.rate or None,
        kills=args.kills,
        abort_percent=args.abort_percent,
        seed=args.seed,
    )
    report = run_and_print(parser, settings, run_copier_lab)
    return 0 if report.caught_up else 1


if __name__ == "__main__":
    sys.exit(main())
