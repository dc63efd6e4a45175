"""`dgm broker start|stop|status|fetch|tool`: the embedded Kafka cluster from the shell."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from embedded_kafka import versions
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.distribution import KafkaDistribution, resolve_distribution
from embedded_kafka.kafka_jars import KAFKA_VERSION
from embedded_kafka.tools import KAFKA_TOOLS, tool_command
from embedded_kafka.versions import KafkaRelease

VERSION_HELP = (
    f"a supported Apache Kafka version or line ({', '.join(versions.SUPPORTED)}; "
    f"default {KAFKA_VERSION}; docs/compatibility.md)"
)


def register(commands: Any) -> None:
    broker = commands.add_parser(
        "broker", help="run a real Apache Kafka (KRaft, or ZooKeeper for 3.x) on loopback"
    )
    actions = broker.add_subparsers(dest="action", metavar="ACTION", required=True)

    start = actions.add_parser("start", help="start the embedded cluster; prints bootstrap servers")
    start.add_argument("--brokers", type=int, choices=(1, 3), default=1)
    start.add_argument("--kafka-version", metavar="VERSION", help=VERSION_HELP)
    start.add_argument(
        "--mode",
        choices=versions.MODES,
        default=versions.KRAFT,
        help="KRaft (default), or ZooKeeper: a ZooKeeper server of its own (Kafka 3.x only)",
    )
    start.add_argument("--kafka-home", help="an existing Kafka distribution (else KAFKA_HOME)")
    start.add_argument("--fresh", action="store_true", help="wipe the cluster's data first")
    start.add_argument("--state-dir", help="overrides the config's state_dir")
    start.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker property, e.g. --set transaction.max.timeout.ms=60000",
    )
    start.set_defaults(handler=_start)

    stop = actions.add_parser("stop", help="stop the embedded cluster (idempotent)")
    stop.add_argument("--state-dir", help="overrides the config's state_dir")
    stop.set_defaults(handler=_stop)

    status = actions.add_parser("status", help="what runs, where")
    status.add_argument("--state-dir", help="overrides the config's state_dir")
    status.set_defaults(handler=_status)

    fetch = actions.add_parser("fetch", help="download Kafka's jars into the cache, start nothing")
    fetch.add_argument("--kafka-version", metavar="VERSION", help=VERSION_HELP)
    fetch.add_argument("--kafka-home", help="an existing Kafka distribution (else KAFKA_HOME)")
    fetch.set_defaults(handler=_fetch)

    tool = actions.add_parser(
        "tool",
        help="run one of Kafka's own tools from the same jars",
        description="Tools: " + ", ".join(sorted(KAFKA_TOOLS)) + " (or a fully qualified class).",
    )
    tool.add_argument("name", help="tool name or Java class")
    tool.add_argument("args", nargs=argparse.REMAINDER, help="the tool's own arguments")
    tool.set_defaults(handler=_tool)


def state_dir_of(args: argparse.Namespace) -> Path:
    if getattr(args, "state_dir", None):
        return Path(args.state_dir).resolve()
    from dgm.config.loader import load_config

    return load_config(args.config).state_dir


def release_of(args: argparse.Namespace) -> tuple[KafkaRelease, KafkaDistribution]:
    """The release asked for and its jars: pinned ones (a supported version), or an existing
    distribution's (--kafka-home, KAFKA_HOME), whose own version then counts."""
    home = args.kafka_home or os.environ.get("KAFKA_HOME")
    if home:
        distribution = resolve_distribution(home)
        version = distribution.known_version or args.kafka_version or KAFKA_VERSION
        return KafkaRelease(version, args.mode), distribution
    release = versions.release(args.kafka_version, args.mode)
    return release, resolve_distribution(kafka_version=release.version)


def _start(args: argparse.Namespace) -> int:
    overrides = dict(_key_value(item) for item in args.set)
    release, distribution = release_of(args)
    cluster = EmbeddedCluster(
        state_dir_of(args), brokers=args.brokers, overrides=overrides, release=release
    )
    began = time.monotonic()
    print(
        f"Starting {args.brokers} {release.label} broker(s) from {distribution.libs} ...",
        file=sys.stderr,
    )
    cluster.start(distribution=distribution, fresh=args.fresh)
    print(
        f"{cluster.release.label} ready in {time.monotonic() - began:.1f}s; logs in "
        f"{cluster.folder}",
        file=sys.stderr,
    )
    print(cluster.bootstrap_servers)
    return 0


def _stop(args: argparse.Namespace) -> int:
    cluster = EmbeddedCluster.load(state_dir_of(args))
    if cluster is None or not cluster.running_nodes():
        print("no embedded broker is running", file=sys.stderr)
        if cluster is not None:
            cluster.stop()  # still sweeps any half-started process of this cluster
        return 0
    killed = cluster.stop()
    if killed:
        print(f"brokers with pids {killed} ignored SIGTERM and were killed", file=sys.stderr)
    print("stopped", file=sys.stderr)
    return 0


def _status(args: argparse.Namespace) -> int:
    cluster = EmbeddedCluster.load(state_dir_of(args))
    if cluster is None:
        print("no embedded broker has been started here")
        return 3
    running = cluster.running_nodes()
    print(
        f"cluster {cluster.cluster_id}, {cluster.release.label}: "
        f"{len(running)}/{len(cluster.nodes)} brokers running"
    )
    zookeeper = cluster.zookeeper
    if zookeeper is not None:
        state = "running" if zookeeper.alive() else "stopped"
        print(f"  ZooKeeper: {state}  {zookeeper.connect}  log {zookeeper.log_file}")
    for node in cluster.nodes:
        state = "running" if node in running else "stopped"
        print(
            f"  broker {node.node_id}: {state}  127.0.0.1:{node.ports.port}  "
            f"fault listener {node.ports.fault_listen_port} advertised as "
            f"{node.ports.fault_advertised_port}  log {node.log_file}"
        )
    print(f"bootstrap servers: {cluster.bootstrap_servers}")
    return 0 if running else 3


def _fetch(args: argparse.Namespace) -> int:
    if args.kafka_home:
        distribution = resolve_distribution(args.kafka_home)
    else:
        version = versions.supported_version(args.kafka_version)
        distribution = resolve_distribution(kafka_version=version)
    print(f"Kafka {distribution.version} ({distribution.origin}): {distribution.libs}")
    return 0


def _tool(args: argparse.Namespace) -> int:
    return subprocess.run(tool_command(args.name, args.args), check=False).returncode


def _key_value(item: str) -> tuple[str, str]:
    key, separator, value = item.partition("=")
    if not separator or not key:
        raise SystemExit(f"dgm: error: --set expects KEY=VALUE, got {item!r}")
    return key.strip(), value.strip()
