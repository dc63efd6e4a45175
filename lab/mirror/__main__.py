"""`python -m lab.mirror --source-bootstrap A --target-bootstrap B [--exactly-once] [...]`: one
run of MirrorMaker 2 from cluster a to cluster b through SIGKILLs (or stopped for good); prints
the JSON report on stdout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lab.mirror.config import POLICIES
from lab.mirror.run import FAULTS, MirrorLabSettings, run_mirror_lab
from lab.runner import add_folder_options, add_production_options, run_and_print


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.mirror")
    parser.add_argument("--source-bootstrap", required=True, help="cluster a (the source topic)")
    parser.add_argument("--target-bootstrap", required=True, help="cluster b (the replica)")
    parser.add_argument(
        "--fault", choices=FAULTS, default="kill", help="kill: SIGKILLs; stop: stopped for good"
    )
    parser.add_argument(
        "--exactly-once", action="store_true", help="exactly-once source support (KIP-618)"
    )
    parser.add_argument(
        "--policy", choices=POLICIES, default="default", help="replica name: a.<topic> or same"
    )
    add_production_options(parser, "MirrorMaker 2")
    parser.add_argument(
        "--no-headers", action="store_true", help="the source records carry no dgm header"
    )
    add_folder_options(parser, "fault moments")
    args = parser.parse_args(argv)
    settings = MirrorLabSettings(
        source_bootstrap=args.source_bootstrap,
        target_bootstrap=args.target_bootstrap,
        lab_dir=Path(args.lab_dir),
        fault=args.fault,
        exactly_once=args.exactly_once,
        policy=args.policy,
        messages=args.messages,
        rate=args.rate or None,
        kills=args.kills,
        stamp_headers=not args.no_headers,
        seed=args.seed,
    )
    report = run_and_print(parser, settings, run_mirror_lab)
    return 0 if report.caught_up or args.fault == "stop" else 1


if __name__ == "__main__":
    sys.exit(main())
