"""The monitoring stack as services — `dgm collect`, `dgm analyze`, `dgm dashboard`,
`dgm exporter` — and the foreground loop of `dgm run` / `dgm demo`: the dashboard URL once it
answers, a status line every so often, and a clean stop on Ctrl-C or SIGTERM."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from shell.services import ServiceGroup, ServiceSpec, dgm_command
from shell.status import last_line, read_status

STATUS_EVERY_S = 15.0
Say = Callable[[str], None]


def monitoring_services(
    config: Path | None,
    dashboard: tuple[str, int] | None,
    env: Mapping[str, str] | None = None,
    exporter: tuple[str, int] | None = None,
    watch: bool = True,
) -> list[ServiceSpec]:
    """collectors, the watch (when `watch`), analysis (with its alerts) and, unless None,
    the dashboard and the Prometheus exporter, each on its (host, port)."""
    specs = [
        ServiceSpec("collectors", dgm_command("collect", config=config), env),
        ServiceSpec("analysis", dgm_command("analyze", config=config), env),
    ]
    if watch:
        specs.insert(1, ServiceSpec("watch", dgm_command("watch", config=config), env))
    if dashboard is not None:
        host, port = dashboard
        command = dgm_command("dashboard", "--host", host, "--port", str(port), config=config)
        specs.append(ServiceSpec("dashboard", command, env))
    if exporter is not None:
        host, port = exporter
        command = dgm_command("exporter", "--host", host, "--port", str(port), config=config)
        specs.append(ServiceSpec("exporter", command, env))
    return specs


def dashboard_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://{shown}:{port}"


def metrics_url(host: str, port: int) -> str:
    return f"{dashboard_url(host, port)}/metrics"


def dashboard_answers(url: str, timeout: float = 2.0) -> bool:
    """Streamlit's health endpoint says ok."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=timeout) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def follow(
    group: ServiceGroup,
    state_dir: Path,
    url: str | None,
    stop: threading.Event,
    say: Say,
    status_every: float = STATUS_EVERY_S,
) -> None:
    """Until `stop`: say the dashboard URL once it answers, and a status line every
    `status_every` seconds (while nothing is published, what the analysis is doing)."""
    announced = url is None
    next_status = time.monotonic()
    while not stop.is_set():
        if not announced and url is not None and dashboard_answers(url):
            say(f"dashboard: {url}")
            announced = True
        if time.monotonic() >= next_status:
            doing = last_line(group.log_path("analysis"), "analy")
            say(read_status(state_dir).line(doing))
            next_status = time.monotonic() + status_every
        stop.wait(1.0)
