"""`dgm lab demo`: the continuous lab alone, against any cluster (the compose demo profile
runs it), until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Any

from dgm.config.loader import CONFIG_FILE_NAME, load_config
from dgm.util.command_line import say
from dgm.util.errors import UserFacingError
from dgm.util.signals import please_wait, stop_on_signals
from lab.continuous import DEMO_PIPELINES, ContinuousLab, ContinuousSettings
from shell.connection import bootstrap_servers, embedded_cluster


def register_lab_demo(actions: Any) -> None:
    demo = actions.add_parser(
        "demo",
        help="every lab pipeline, continuously, with faults on a schedule, until stopped",
        description="Creates each demo pipeline's topics (kept if they exist), adds the "
        "pipelines to dgm.toml (a read-only file is left as it is: declare them there), then "
        "runs per pipeline a supervised processor, a stamped producer at --rate and a SIGKILL "
        "or rebalance every 30-60 s, until Ctrl-C or SIGTERM. The drop-acks pipeline needs "
        "the embedded broker (its FAULT listener) and is left out against another cluster.",
    )
    demo.add_argument(
        "--bootstrap", help="Kafka bootstrap servers (default: config, else embedded)"
    )
    demo.add_argument("--rate", type=float, default=5.0, help="messages/s per pipeline (default 5)")
    demo.add_argument(
        "--pipeline",
        action="append",
        choices=[p.name for p in DEMO_PIPELINES],
        help="run only these pipelines (repeatable; default: all that the cluster allows)",
    )
    demo.add_argument(
        "--replication-factor", type=int, default=-1, help="of the topics (default: the broker's)"
    )
    demo.set_defaults(handler=_lab_demo)


def _lab_demo(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    servers = bootstrap_servers(config, args.bootstrap)
    embedded = embedded_cluster(config, args.bootstrap)
    pipelines = tuple(
        p
        for p in DEMO_PIPELINES
        if (embedded is not None or not p.drop_acks)
        and (not args.pipeline or p.name in args.pipeline)
    )
    if not pipelines:
        raise UserFacingError("no demo pipeline left to run (drop-acks needs the embedded broker)")
    config_path = Path(args.config) if args.config else config.source or Path(CONFIG_FILE_NAME)
    lab = ContinuousLab(
        ContinuousSettings(
            bootstrap_servers=servers,
            lab_dir=config.state_dir / "lab",
            pipelines=pipelines,
            rate=args.rate,
            replication_factor=args.replication_factor,
            cluster=embedded,
            config_path=config_path.absolute(),
            client=dict(config.cluster.client),
            progress=say,
        )
    )
    stop = threading.Event()
    with stop_on_signals(stop, please_wait(say)):
        lab.setup()
        lab.start()
        say(f"lab demo: {len(pipelines)} pipelines on {servers}; Ctrl-C stops them")
        stop.wait()
        say("stopping the lab …")
        lab.stop()
    say("lab stopped")
    return 0
