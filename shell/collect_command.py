"""`dgm collect`: sample the cluster's offsets, groups and transactions into Parquet files."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from collectors.clients import Clients, check_bootstrap
from collectors.cycle import Collector
from collectors.runner import Runner
from dgm.command_line import add_loop_arguments, seconds
from dgm.config import load_config
from dgm.errors import UserFacingError
from dgm.sample_upkeep import keep_bounded
from dgm.samples import SampleStore, samples_dir
from dgm.signals import stop_on_signals
from shell.connection import bootstrap_servers, client_config, pipeline_groups, pipeline_topics

log = logging.getLogger("dgm.collect")


def register(commands: Any) -> None:
    collect = commands.add_parser(
        "collect",
        help="sample offsets, LSO, consumer groups and transactions into Parquet files",
        description="Every interval, sample each monitored partition's log-start offset, high "
        "watermark and LSO, every consumer group's members and committed offsets, and every "
        "partition's active producers and open transactions, into "
        "<state_dir>/samples/<kind>/. Stops cleanly on SIGTERM or Ctrl-C.",
    )
    add_loop_arguments(collect, "cycle", "collectors.interval_s")
    collect.add_argument(
        "--request-timeout",
        type=seconds,
        default=10.0,
        help="seconds one admin request may take (default: 10)",
    )
    collect.add_argument(
        "--connect-timeout",
        type=seconds,
        default=30.0,
        help="seconds to reach the cluster at start before giving up (default: 30); a "
        "cluster this state dir has samples of is waited for instead (an outage)",
    )
    collect.set_defaults(handler=_collect)


def _collect(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    settings = config.collectors
    if args.interval is not None:
        settings = dataclasses.replace(settings, interval_s=args.interval)
    servers = bootstrap_servers(config, args.bootstrap)
    check_bootstrap(servers)
    if not args.verbose:
        # kafka-python logs every failed connection attempt; an outage is reported once.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    clients = Clients(client_config(config, args.bootstrap), args.request_timeout)
    store = SampleStore(config.state_dir)
    collector = Collector(
        clients,
        settings,
        store,
        args.request_timeout,
        expected_topics=pipeline_topics(config),
        expected_groups=pipeline_groups(config),
    )
    stop = threading.Event()
    retention = timedelta(hours=config.analysis.retention_h)

    def upkeep() -> None:
        done = keep_bounded(store, datetime.now(UTC), retention)
        for error in done.errors:
            log.warning("sample upkeep skipped %s", error)
        log.debug(done.line())

    runner = Runner(
        collector,
        settings.interval_s,
        stop,
        args.connect_timeout,
        _status,
        upkeep=upkeep,
        sampled_before=store.newest_time("offsets") is not None,
    )

    try:
        with stop_on_signals(stop):  # the loop finishes the write in progress, then returns
            if args.once:
                runner.run_once()
            else:
                log.info(
                    "collecting from %s every %gs into %s",
                    servers,
                    settings.interval_s,
                    samples_dir(config.state_dir),
                )
                runner.run_forever()
                log.info("stopped")
    except OSError as error:
        raise UserFacingError(f"cannot write samples under {config.state_dir}: {error}") from None
    finally:
        clients.close()
    return 0


def _status(line: str) -> None:
    print(line, flush=True)
