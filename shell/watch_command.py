"""`dgm watch`: read the pipelines' sink topics continuously and publish the duplicates seen."""

from __future__ import annotations

import argparse
import logging
import threading
from datetime import timedelta
from typing import Any

from dgm.config.loader import load_config
from dgm.contracts.watched import watch_path
from dgm.util.errors import UserFacingError
from dgm.util.signals import stop_on_signals
from shell.connection import cluster_client_config
from watch.loop import Watch, registries, watched_topics
from watch.reader import SinkReader

log = logging.getLogger("dgm.watch")


def register(commands: Any) -> None:
    watch = commands.add_parser(
        "watch",
        help="read the sink topics continuously and publish the duplicates seen within seconds",
        description="Read every pipeline's sink topics as a read_committed consumer (no group, "
        "nothing committed), from [watch] lookback records before their end, and publish each "
        "extra copy of an id it has read before to <state_dir>/watch.parquet within a second. "
        "The analysis stays the judge: causes, verdicts and every copy. Stops cleanly on "
        "SIGTERM or Ctrl-C.",
    )
    watch.add_argument("--bootstrap", help="host:port[,...] (default: from dgm.toml)")
    watch.set_defaults(handler=_watch)


def _watch(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    routes = watched_topics(config)
    if not routes:
        print("watch: no pipeline with sink topics keeps every id; nothing to watch", flush=True)
        return 0
    settings = config.watch
    readers = {
        cluster: SinkReader(
            cluster_client_config(config, cluster, args.bootstrap), topics, settings.lookback
        )
        for cluster, topics in routes.items()
    }
    watch = Watch(
        config.state_dir,
        readers,
        routes,
        settings.max_ids,
        keep=timedelta(hours=config.analysis.retention_h),
        registries=registries(config, list(routes)),
    )
    topics = sum(len(t) for t in routes.values())
    print(f"watch: reading {topics} sink topics into {watch_path(config.state_dir)}", flush=True)
    stop = threading.Event()
    try:
        with stop_on_signals(stop):
            watch.run(stop, say=lambda line: print(line, flush=True))
    except OSError as error:
        raise UserFacingError(f"cannot write {watch_path(config.state_dir)}: {error}") from None
    finally:
        for reader in readers.values():
            reader.close()
    log.info("stopped")
    return 0
