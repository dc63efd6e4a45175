"""`dgm run`: collectors, the watch, periodic analysis (with alerts) and the dashboard against
the configured cluster, as one foreground command. Each part stays startable alone
(`dgm collect`, `dgm watch`, `dgm analyze`, `dgm dashboard`); this only starts them
together."""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path
from typing import Any

from dgm.config.loader import ENV_STATE_DIR, load_config
from dgm.util.command_line import add_stack_arguments, say
from dgm.util.ports import check_port_free
from dgm.util.signals import please_wait, stop_on_signals
from shell.connection import monitored_servers
from shell.services import ServiceGroup
from shell.stack import (
    dashboard_url,
    follow,
    metrics_url,
    monitoring_services,
)
from watch.loop import watched_topics


def register(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="collectors, periodic analysis and the dashboard against your cluster",
        description="Starts `dgm collect`, `dgm analyze` (which also evaluates alerts), "
        "`dgm dashboard` and `dgm exporter` (Prometheus metrics) as child processes against "
        "the cluster dgm.toml names (security settings included), logs in <state_dir>/logs/, "
        "restarts one that dies, prints the dashboard URL and a status line every 15 s. "
        "Ctrl-C or SIGTERM stops everything.",
    )
    run.add_argument("--no-dashboard", action="store_true", help="collect and analyze only")
    add_stack_arguments(run)
    run.add_argument("--no-exporter", action="store_true", help="no Prometheus exporter")
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    config_arg = getattr(args, "config", None)
    config = load_config(config_arg)
    servers = monitored_servers(config)  # a clear error now if there is no cluster
    config_path = Path(config.source).absolute() if config.source is not None else None
    dashboard = None if args.no_dashboard else (args.host, args.port)
    exporter = None if args.no_exporter else (args.host, args.exporter_port)
    for address in (dashboard, exporter):
        if address is not None:
            check_port_free(*address)
    state_dir = Path(config.state_dir).absolute()
    state_dir.mkdir(parents=True, exist_ok=True)
    url = dashboard_url(*dashboard) if dashboard is not None else None
    stop = threading.Event()
    group = ServiceGroup(state_dir / "logs", say)
    with stop_on_signals(stop, please_wait(say)):
        try:
            # Set to what the config says anyway; it marks every process of this run.
            env = {**os.environ, ENV_STATE_DIR: str(state_dir)}
            watch = config.watch.enabled and bool(watched_topics(config))
            for spec in monitoring_services(config_path, dashboard, env, exporter, watch):
                group.start(spec)
            say(
                f"dgm run: monitoring {servers} ({len(config.pipelines)} pipelines); "
                f"logs in {group.log_dir}"
                + (f"; dashboard at {url} once it answers" if url else "")
                + (f"; Prometheus metrics at {metrics_url(*exporter)}" if exporter else "")
            )
            follow(group, state_dir, url, stop, say)
            say("stopping…")
        finally:
            group.stop()
    say("stopped")
    return 0
