"""`dgm demo`: the whole system in one command, on dgm's embedded broker.

Starts a real Kafka on loopback, writes the demo's dgm.toml into its state directory, runs
the continuous lab (one pipeline per mode, plus one whose producer's acks are dropped), the
collectors, periodic analysis and the dashboard, and prints the dashboard URL and a status
line. The config declares alert rules that the broken exactly-once pipeline sets off within
its first minutes (it reads aborted transactions); their webhook is a receiver the demo runs
on 127.0.0.1 (alerts/receiver.py), which keeps what it gets for the dashboard's Alerts page.
Ctrl-C (or SIGTERM) stops the lab, the services and the broker, in that order.

The state directory is the demo's own: it is emptied at every start (a directory that holds
anything else is refused). Every process of the demo carries DGM_STATE_DIR=<state dir> in its
environment and dies with the demo's process. Other shells reach the running demo through its
config file: the demo prints the exact commands (`dgm verdicts --config <state>/dgm.toml`,
or `export DGM_CONFIG=<state>/dgm.toml` once for every command).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

from alerts.receiver import WebhookReceiver
from dgm.alerting.store import AlertStore
from dgm.config.loader import CONFIG_FILE_NAME, ENV_BOOTSTRAP, ENV_STATE_DIR
from dgm.util.command_line import add_stack_arguments, say
from dgm.util.errors import UserFacingError
from dgm.util.ports import check_port_free
from dgm.util.signals import interrupt_on_signals, please_wait, stop_on_signals
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.distribution import resolve_distribution
from embedded_kafka.java import find_java
from lab.continuous import ContinuousLab, ContinuousSettings
from shell.services import ServiceGroup
from shell.stack import (
    dashboard_url,
    follow,
    metrics_url,
    monitoring_services,
)

DEFAULT_STATE_DIR = ".dgm-demo"
MARKER = ".dgm-demo"  # a file in the state directory: it is the demo's and may be emptied
# The audit reads up to the newest sampled offsets, so their age adds to how late a
# duplicate is seen: a cycle takes ~0.04 s on the demo; every 2 s (not 5) took ~2 s off the
# detection latency's p50, every 1 s (not 2) ~2 s more once runs were short (bench/HISTORY.md,
# "The demo's analysis in fewer Spark jobs").
COLLECT_EVERY_S = 1
# A run takes ~4-5 s on the demo since small cycles work on the driver: one every 5 s
# detects a duplicate in ~9 s (p50), against ~12.5 s every 10 s (same HISTORY section).
ANALYZE_EVERY_S = 5
# Long enough for one analysis run: a sink copy written after the audit's bound, while the
# group's newer commit is already sampled, must not count as lost.
GRACE_S = 30


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="the whole system in one command: embedded Kafka, lab pipelines, dashboard",
        description="Starts a real Kafka on loopback, the lab's pipelines (one per mode: "
        "at-most-once, at-least-once, exactly-once, exactly-once-broken, idempotent-sink, and "
        "one whose producer's acks are dropped) with crashes and rebalances on a schedule, the "
        "collectors, periodic analysis, the dashboard, and alert rules notifying a local webhook "
        "receiver (the Alerts page shows what it got). Ctrl-C stops everything.",
    )
    demo.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="Kafka brokers")
    add_stack_arguments(demo)
    demo.add_argument(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        help=f"the demo's own folder, emptied at start (default ./{DEFAULT_STATE_DIR})",
    )
    demo.add_argument("--rate", type=float, default=5.0, help="messages/s per pipeline (default 5)")
    demo.set_defaults(handler=_demo)


def prepare_state_dir(state_dir: Path) -> None:
    """An empty demo folder: created, or emptied if it is a previous demo's."""
    if state_dir.exists() and any(state_dir.iterdir()):
        if not (state_dir / MARKER).exists():
            raise UserFacingError(
                f"{state_dir} is not empty and not a dgm demo folder; pass --state-dir"
            )
        running = EmbeddedCluster.running(state_dir)
        if running is not None:
            raise UserFacingError(
                f"a demo already runs in {state_dir} (Kafka at {running.bootstrap_servers})"
            )
        for entry in state_dir.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / MARKER).write_text("dgm demo state: emptied by every `dgm demo`\n")


# The rules the demo declares: the broken exactly-once pipeline reads records of aborted
# transactions (every third source transaction is aborted) from its first minutes, so both
# fire on it; `latest` lets the first one resolve when a window goes by without any.
DEMO_RULES = """
# Alert rules (`dgm alerts list`): evaluated after every analysis run; the demo's own
# receiver gets their notifications, and the dashboard's Alerts page shows both.
[[alerts]]
name = "aborted-reads"
metric = "aborted_reads"
threshold = 0
window = "latest"
severity = "critical"

[[alerts]]
name = "verdict-violated"
metric = "verdict_violates"
threshold = 0
severity = "critical"
"""


def demo_config(
    state_dir: Path, bootstrap_servers: str, webhook_url: str = "", dashboard: str = ""
) -> str:
    """The demo's dgm.toml: its cluster, fast collectors and analysis and, with a
    `webhook_url` (the demo's receiver), alert rules notifying it with links to `dashboard`."""
    text = (
        "# Written by `dgm demo` at every start; the lab adds its [[pipelines]] below.\n"
        f'state_dir = "{state_dir}"\n\n'
        "[cluster]\n"
        f'bootstrap_servers = "{bootstrap_servers}"\n\n'
        "[collectors]\n"
        f"interval_s = {COLLECT_EVERY_S}\n\n"
        "[analysis]\n"
        f"interval_s = {ANALYZE_EVERY_S}\n"
        f"grace_s = {GRACE_S}\n"
        "window_s = 60\n"
    )
    if not webhook_url:
        return text
    return (
        f"{text}{DEMO_RULES}\n[alerts_webhook]\n"
        f'url = "{webhook_url}"\ndashboard_url = "{dashboard}"\n'
    )


def other_shell_commands(config_path: Path) -> list[str]:
    """What to type in another shell to look at the running demo (printed at start)."""
    quoted = shlex.quote(str(config_path))
    return [
        f"dgm verdicts --config {quoted}",
        f"dgm alerts list --config {quoted}",
        f"export DGM_CONFIG={quoted}  # then every dgm command reads the demo's config",
    ]


def _demo(args: argparse.Namespace) -> int:
    if args.rate <= 0:
        raise UserFacingError(f"--rate: expected > 0, got {args.rate}")
    state_dir = Path(args.state_dir).expanduser().absolute()
    find_java()  # no Java: one clear line before anything starts
    check_port_free(args.host, args.port)
    check_port_free(args.host, args.exporter_port)
    prepare_state_dir(state_dir)
    # Every child inherits it: the services read it, and it marks the demo's processes.
    os.environ[ENV_STATE_DIR] = str(state_dir)
    os.environ.pop(ENV_BOOTSTRAP, None)
    began = time.monotonic()
    cluster: EmbeddedCluster | None = None
    lab: ContinuousLab | None = None
    receiver: WebhookReceiver | None = None
    group = ServiceGroup(state_dir / "logs", say)
    stop = threading.Event()
    previous = interrupt_on_signals()
    try:
        distribution = resolve_distribution(progress=say)
        say(f"starting {args.brokers} Kafka broker(s) ...")
        cluster = EmbeddedCluster(state_dir, brokers=args.brokers, die_with_parent=True)
        cluster.start(distribution=distribution, fresh=True)
        say(f"Kafka ready at {cluster.bootstrap_servers} ({time.monotonic() - began:.0f}s)")
        url = dashboard_url(args.host, args.port)
        receiver = WebhookReceiver(AlertStore(state_dir)).start()
        config_path = state_dir / CONFIG_FILE_NAME
        config_path.write_text(demo_config(state_dir, cluster.bootstrap_servers, receiver.url, url))
        lab = ContinuousLab(
            ContinuousSettings(
                bootstrap_servers=cluster.bootstrap_servers,
                lab_dir=state_dir / "lab",
                rate=args.rate,
                cluster=cluster,
                config_path=config_path,
                progress=_lab_say(state_dir / "logs" / "lab.log"),
            )
        )
        lab.setup()  # topics and [[pipelines]] before the services read the config
        exporter = (args.host, args.exporter_port)
        for spec in monitoring_services(config_path, (args.host, args.port), exporter=exporter):
            group.start(spec)
        lab.start()
        say(
            f"demo running: {len(lab.pipelines)} pipelines, logs in {group.log_dir}; "
            f"dashboard at {url} once it answers (the first analysis starts Spark, which "
            f"resolves its Kafka package once); Prometheus metrics at {metrics_url(*exporter)}. "
            "Ctrl-C stops everything."
        )
        say(
            f"alerts: rules on aborted reads and violated verdicts notify the demo's webhook "
            f"receiver at {receiver.url}; the dashboard's Alerts page shows what it got"
        )
        commands = other_shell_commands(config_path)
        say(f"from another shell: {'; '.join(commands[:2])}; or {commands[2]}")
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        with stop_on_signals(stop, please_wait(say)):
            follow(group, state_dir, url, stop, say)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, lambda *_: say("stopping; please wait"))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        say("stopping the demo …")
        if lab is not None:
            lab.stop()
        group.stop()
        if receiver is not None:
            receiver.stop()
        if cluster is not None:
            cluster.stop()
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
    say("demo stopped")
    return 0


def _lab_say(log: Path) -> Any:
    """The lab's progress into a log file: the terminal keeps the status lines."""
    log.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def write(line: str) -> None:
        with lock, log.open("a") as f:
            f.write(f"{time.strftime('%H:%M:%S')} {line}\n")

    return write
