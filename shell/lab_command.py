"""`dgm lab run`: a reference pipeline on a real cluster, through real faults, with a report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from dgm.config.loader import CONFIG_FILE_NAME, load_config
from lab.faults import FAULT_KINDS
from lab.processors.settings import MODES
from lab.run import LabSettings, run_lab
from lab.supervisor import KILL_AIMS
from shell.connection import bootstrap_servers, embedded_cluster
from shell.lab_demo_command import register_lab_demo


def register(commands: Any) -> None:
    lab = commands.add_parser("lab", help="reference pipelines driven through real failures")
    actions = lab.add_subparsers(dest="action", metavar="ACTION", required=True)
    run = actions.add_parser(
        "run",
        help="run one pipeline until it has processed every message; write a JSON report",
        description="Creates the pipeline's topics, runs the stamped producer, the processor "
        "and the faults until every message is sent and the processor has caught up, writes a "
        "JSON report and adds the pipeline to dgm.toml so that dgm monitors it.",
    )
    run.add_argument("--pipeline", required=True, help="pipeline name (also names its topics)")
    run.add_argument("--mode", required=True, choices=MODES, help="the processor's semantic")
    run.add_argument("--messages", type=int, default=1000, help="source messages (default 1000)")
    run.add_argument("--crashes", type=int, default=0, help="SIGKILLs of the processor")
    run.add_argument(
        "--rate", type=float, default=200.0, help="source messages/s (default 200; 0 = no limit)"
    )
    run.add_argument(
        "--fault",
        action="extend",
        nargs="+",
        default=[],
        choices=FAULT_KINDS,
        help="kill (3 crashes unless --crashes), rebalance, broker-restart (3-broker embedded "
        "cluster), drop-acks (the producer's acks dropped by a proxy); repeatable",
    )
    run.add_argument("--kill-at", choices=KILL_AIMS, help="where in its loop a crash lands")
    run.add_argument(
        "--producer-idempotence",
        choices=("on", "off"),
        default="on",
        help="the source producer's enable.idempotence (off + drop-acks = duplicates)",
    )
    run.add_argument(
        "--producer-max-in-flight",
        type=int,
        metavar="N",
        help="the source producer's max.in.flight.requests.per.connection (idempotence off, "
        "N > 1 + drop-acks = records out of order)",
    )
    run.add_argument("--bootstrap", help="Kafka bootstrap servers (default: config, else embedded)")
    run.add_argument("--report", help="report path (default: <state_dir>/lab/<run>/report.json)")
    run.add_argument("--seed", type=int, help="seed for random kill points")
    run.set_defaults(handler=_run)
    register_lab_demo(actions)


def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    bootstrap = bootstrap_servers(config, args.bootstrap)
    embedded = embedded_cluster(config, args.bootstrap)
    config_path = Path(args.config) if args.config else config.source or Path(CONFIG_FILE_NAME)
    report = run_lab(
        LabSettings(
            pipeline=args.pipeline,
            mode=args.mode,
            bootstrap_servers=bootstrap,
            lab_dir=config.state_dir / "lab",
            messages=args.messages,
            crashes=args.crashes,
            rate=args.rate or None,
            faults=tuple(args.fault),
            kill_at=args.kill_at,
            producer_idempotence=args.producer_idempotence == "on",
            producer_max_in_flight=args.producer_max_in_flight,
            seed=args.seed,
            cluster=embedded,
            config_path=config_path.absolute(),
            report_path=Path(args.report).absolute() if args.report else None,
            client=dict(config.cluster.client),
        )
    )
    report_path = args.report or str(Path(report.run_dir) / "report.json")
    counts = report.messages
    print(
        f"{report.pipeline}: {counts['acked']}/{counts['requested']} acked, "
        f"{len(report.crashes)} crashes, {len(report.faults)} faults; "
        f"caught up: {'yes' if report.caught_up else 'NO'}",
        file=sys.stderr,
    )
    print(report_path)
    return 0 if report.caught_up else 1
