"""`dgm exporter`: serve `/metrics` and the JSON API over the published analysis."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from dgm.config.loader import load_config
from dgm.util.command_line import EXPORTER_PORT, add_listen_arguments
from dgm.util.errors import UserFacingError
from dgm.util.signals import stop_on_signals
from exporter.server import ExporterServer
from exporter.snapshot import ScrapeSettings


def register(commands: Any) -> None:
    serve = commands.add_parser(
        "exporter",
        help="serve Prometheus metrics and a read-only JSON API over the published analysis",
        description="An HTTP server: /metrics (verdicts, duplicate and loss ratios, LSO and "
        "consumer lag, open and hanging transactions, and the monitor's own health, read from "
        "<state_dir>/dgm.duckdb at every scrape) and /api/v1/verdicts, "
        "/api/v1/pipelines/{name}, /api/v1/topics/{topic}/duplicates. Binds 127.0.0.1 unless "
        "--host says otherwise; Ctrl-C or SIGTERM stops it.",
    )
    add_listen_arguments(serve, EXPORTER_PORT)
    serve.set_defaults(handler=_exporter)


def _exporter(args: argparse.Namespace) -> int:
    config = load_config(getattr(args, "config", None))
    try:
        settings = ScrapeSettings(config.analysis.interval_s, config.exporter.granularity)
        server = ExporterServer((args.host, args.port), config.state_dir, settings)
    except OSError as error:
        raise UserFacingError(f"cannot listen on {args.host}:{args.port}: {error}") from None
    stop = threading.Event()
    with server, stop_on_signals(stop):
        thread = threading.Thread(target=server.serve_forever, name="exporter", daemon=True)
        thread.start()
        print(
            f"dgm exporter on http://{args.host}:{server.port}/metrics over {config.state_dir}",
            flush=True,
        )
        stop.wait()
        server.shutdown()
        thread.join()
    return 0
