"""`dgm analyze`: audit then analyze then publish, once or every interval."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import threading
from typing import Any

from dgm.config.document import DgmConfig
from dgm.config.loader import load_config
from dgm.util.command_line import add_loop_arguments
from dgm.util.signals import interrupt, stop_on_signals
from shell.connection import default_cluster_servers
from spark_jobs.job import AfterPublish, AnalysisJob

log = logging.getLogger("dgm.analyze")


def register(commands: Any) -> None:
    analyze = commands.add_parser(
        "analyze",
        help="audit new records with Spark, compute duplicates, losses and verdicts, publish",
        description="Each run: audit every monitored topic's new offset range (up to the last "
        "sampled LSO) into fingerprints, analyze fingerprints and collector samples into "
        "metrics, duplicates, lost ids and verdicts, and publish them atomically to "
        "<state_dir>/dgm.duckdb. Stops cleanly on SIGTERM or Ctrl-C (a run in progress is "
        "abandoned; its range is audited again by the next run, never twice).",
    )
    add_loop_arguments(analyze, "run", "analysis.interval_s")
    analyze.add_argument(
        "--master", help="Spark master URL (default: $DGM_SPARK_MASTER, else analysis.spark_master)"
    )
    analyze.set_defaults(handler=_analyze)


def _analyze(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.interval is not None:
        analysis = dataclasses.replace(config.analysis, interval_s=args.interval)
        config = dataclasses.replace(config, analysis=analysis)
    servers = default_cluster_servers(config, args.bootstrap)
    stop = threading.Event()
    job = AnalysisJob(
        config, servers, master=args.master, progress=_status, after_publish=alerts_hook(config)
    )
    try:
        # A second Ctrl-C abandons the run in progress rather than wait for Spark.
        with stop_on_signals(stop, again=interrupt):
            if args.once:
                job.run_once()
            else:
                log.info(
                    "analyzing every %gs into %s", config.analysis.interval_s, config.state_dir
                )
                job.run_forever(stop)
                log.info("stopped")
    finally:
        job.close()
    return 0


def alerts_hook(config: DgmConfig) -> AfterPublish:
    """What the analysis runs after each publication: the alert evaluation. Its failures (a
    webhook down) are recorded by it and returned as lines, never raised into the analysis."""

    def evaluate() -> list[str]:
        from alerts.run import evaluate_after_analysis

        return [f"alerts: {error}" for error in evaluate_after_analysis(config).errors]

    return evaluate


def _status(line: str) -> None:
    print(line, file=sys.stdout, flush=True)
