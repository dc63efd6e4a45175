"""`dgm collect`: sample the cluster's offsets, groups and transactions into Parquet files."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from collectors.clients import check_bootstrap
from collectors.several import cluster_collectors, run_each_forever, run_each_once
from dgm.config.loader import load_config
from dgm.contracts.clusters import DEFAULT_CLUSTER
from dgm.contracts.sample_upkeep import keep_bounded
from dgm.contracts.samples import SampleStore, samples_dir
from dgm.util.command_line import add_loop_arguments, seconds
from dgm.util.errors import UserFacingError
from dgm.util.signals import stop_on_signals
from shell.connection import (
    cluster_client_config,
    cluster_servers,
    pipeline_groups,
    pipeline_topics,
)

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
    clusters = config.sampled_clusters()
    servers = {name: cluster_servers(config, name, args.bootstrap) for name in clusters}
    for address in servers.values():
        check_bootstrap(address)
    if not args.verbose:
        # kafka-python logs every failed connection attempt; an outage is reported once.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    store = SampleStore(config.state_dir)
    stop = threading.Event()
    retention = timedelta(hours=config.analysis.retention_h)

    def upkeep() -> None:
        done = keep_bounded(store, datetime.now(UTC), retention)
        for error in done.errors:
            log.warning("sample upkeep skipped %s", error)
        log.debug(done.line())

    def report(cluster: str, line: str) -> None:
        _status(line if len(clusters) == 1 else f"{cluster}: {line}")

    collectors = cluster_collectors(
        {name: cluster_client_config(config, name, args.bootstrap) for name in clusters},
        settings,
        config.state_dir,
        stop,
        args.request_timeout,
        args.connect_timeout,
        report,
        upkeep,
        {name: (pipeline_topics(config, name), pipeline_groups(config, name)) for name in clusters},
    )
    runners = collectors.runners

    try:
        with stop_on_signals(stop):  # the loop finishes the write in progress, then returns
            if args.once and len(runners) == 1:
                next(iter(runners.values())).run_once()
            elif args.once:
                run_each_once(runners)
            else:
                for name in clusters:
                    log.info(
                        "collecting from %s every %gs into %s",
                        servers[name] if name == DEFAULT_CLUSTER else f"{name} ({servers[name]})",
                        settings.interval_s,
                        samples_dir(config.state_dir),
                    )
                if len(runners) == 1:
                    next(iter(runners.values())).run_forever()
                else:
                    run_each_forever(runners, stop)
                log.info("stopped")
    except OSError as error:
        raise UserFacingError(f"cannot write samples under {config.state_dir}: {error}") from None
    finally:
        collectors.close()
    return 0


def _status(line: str) -> None:
    print(line, flush=True)
