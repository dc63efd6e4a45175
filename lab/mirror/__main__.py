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
    parser.add_argument("--messages", type=int, default=3000, help="source records")
    parser.add_argument("--rate", type=float, default=100.0, help="records/s (0 = no limit)")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs of MirrorMaker 2")
    parser.add_argument("--lab-dir", default="lab-runs", help="where each run gets a folder")
    parser.add_argument("--seed", type=int, help="seed of the random fault moments")
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
        seed=args.seed,
    )
    problems = settings.problems()
    if problems:
        parser.error("; ".join(problems))
    report = run_mirror_lab(settings)
    print(report.to_json())
    return 0 if report.caught_up or args.fault == "stop" else 1


if __name__ == "__main__":
    sys.exit(main())
