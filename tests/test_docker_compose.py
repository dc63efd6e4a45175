"""Static checks of docker-compose.yml, the Dockerfile and deploy/ (dgm.compose.toml, the
Prometheus and Alertmanager configs).

There is no Docker engine here, so no container is started: these tests read the files and
check what would otherwise only fail after `docker compose up` (a command the CLI rejects, a
Spark class that does not exist, a broker missing from the quorum, a port open beyond
loopback, executors whose Python differs from the driver's), and run the dgm services'
health checks against what they probe. tests/scenarios/test_standalone_cluster.py starts
the Spark services' commands themselves.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import tomllib
import zipfile
from collections.abc import Iterator, Mapping
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath
from typing import Any, NamedTuple

import pytest
import yaml

from tests.support.compose_file import (
    COMPOSE_FILE,
    ROOT,
    command,
    healthcheck,
    in_test,
    interpolate,
)

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
DGM_CONFIG = ROOT / "deploy" / "dgm.compose.toml"
ALERTMANAGER_CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"

# `dgm` subcommands used below that later issues add. While one is listed here, it must NOT be
# registered yet; once it is, this test fails until the entry is removed, and from then on the
# compose command has to parse with the real CLI.
PENDING: dict[str, int] = {}

# dgm service -> the `dgm` subcommand it runs.
DGM_SERVICES = {
    "collectors": "collect",
    "watch": "watch",
    "analysis": "analyze",
    "dashboard": "dashboard",
    "exporter": "exporter",
    "demo-pipelines": "lab",
}
# Services of the `monitoring` profile, from public images, configured from deploy/.
MONITORING = ("prometheus", "alertmanager", "grafana")
EXPORTER_PORT = "9598"
KAFKA_BROKERS = ("kafka-1", "kafka-2", "kafka-3")
KAFKA_IMAGE = "apache/kafka:4.4.0"
SPARK_MASTER, SPARK_WORKER = "spark-master", "spark-worker"
SPARK_CLASSES = {
    SPARK_MASTER: "org.apache.spark.deploy.master.Master",
    SPARK_WORKER: "org.apache.spark.deploy.worker.Worker",
}
CONFIG_IN_CONTAINER = "/etc/dgm/dgm.toml"
STATE_DIR = "/var/lib/dgm"
LOOPBACK = "127.0.0.1"

# Durability settings every broker must carry (environment variable -> value).
REPLICATION = {
    "KAFKA_DEFAULT_REPLICATION_FACTOR": "3",
    "KAFKA_MIN_INSYNC_REPLICAS": "2",
    # The offsets topic has no min-ISR setting of its own; it uses min.insync.replicas.
    "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "3",
    "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "3",
    "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "2",
    "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
}

# The keys dgm.config.loader reads (a subset is enough for this file).
CONFIG_KEYS: dict[str, set[str]] = {
    "": {"state_dir", "cluster", "collectors", "pipelines", "dashboard"},
    "dashboard": {"allow_edits"},
    "cluster": {"bootstrap_servers", "client"},
    "collectors": {"interval_s", "include_topics", "exclude_topics"},
    "pipelines": {
        "name",
        "source_topics",
        "sink_topics",
        "consumer_group",
        "declared_semantic",
        "message_id",
    },
    "pipelines.message_id": {"kind", "name"},
}


# --- reading the compose file -------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(document, dict), "docker-compose.yml is not a mapping"
    assert isinstance(document.get("services"), dict), "docker-compose.yml has no services"
    return document


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment as strings, from either the mapping or the list form."""
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        return dict(item.split("=", 1) for item in raw)
    return {key: "" if value is None else str(value) for key, value in raw.items()}


def option(argv: list[str], name: str) -> str | None:
    """The value after `name` in argv (also `name=value`), else None."""
    for index, arg in enumerate(argv):
        if arg == name and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


class Port(NamedTuple):
    host_ip: str | None
    published: str | None
    target: str


def ports(service: dict[str, Any]) -> list[Port]:
    """Published ports from the short ("ip:host:container") or the long syntax."""
    found = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            published = entry.get("published")
            found.append(
                Port(
                    entry.get("host_ip"),
                    None if published is None else str(published),
                    str(entry["target"]),
                )
            )
            continue
        text = str(entry).split("/", 1)[0]  # drop /tcp
        host_ip = None
        if text.startswith("["):  # [::1]:8080:80
            host_ip, text = text[1:].split("]:", 1)
        parts = text.split(":")
        if len(parts) == 3:
            host_ip, parts = parts[0], parts[1:]
        found.append(Port(host_ip, parts[0] if len(parts) == 2 else None, parts[-1]))
    return found


class Mount(NamedTuple):
    kind: str  # volume or bind
    source: str
    target: str
    read_only: bool


def mounts(service: dict[str, Any]) -> list[Mount]:
    found = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            found.append(
                Mount(
                    entry["type"],
                    str(entry.get("source", "")),
                    entry["target"],
                    bool(entry.get("read_only", False)),
                )
            )
            continue
        source, target, *mode = str(entry).split(":")
        kind = "bind" if source.startswith((".", "/", "~")) else "volume"
        found.append(Mount(kind, source, target, "ro" in ",".join(mode).split(",")))
    return found


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """Dependency -> condition (short list syntax means service_started)."""
    raw = service.get("depends_on") or {}
    if isinstance(raw, list):
        return {name: "service_started" for name in raw}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in raw.items()}


# --- the file as a whole ------------------------------------------------------------------


def test_compose_file_parses_with_every_service_runnable(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    assert "version" not in compose, "the compose spec has no `version:` key"
    expected = {*KAFKA_BROKERS, SPARK_MASTER, SPARK_WORKER, *DGM_SERVICES}
    assert expected <= set(services), f"missing services: {expected - set(services)}"
    for name, service in services.items():
        assert "image" in service or "build" in service, f"{name} has neither image nor build"


def test_named_volumes_are_declared(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for mount in mounts(service):
            if mount.kind == "volume":
                assert mount.source in declared, f"{name}: volume {mount.source} not declared"


def test_every_published_port_binds_loopback(services: dict[str, dict[str, Any]]) -> None:
    published = [(name, port) for name, service in services.items() for port in ports(service)]
    assert published, "nothing is published at all"
    for name, port in published:
        assert port.host_ip == LOOPBACK, f"{name} publishes {port} beyond loopback"
        assert port.published, f"{name} publishes {port} on a random host port"


def test_health_conditions_name_services_with_healthchecks(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, service in services.items():
        for dependency, condition in depends_on(service).items():
            assert dependency in services, f"{name} depends on unknown service {dependency}"
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], (
                    f"{name} waits for {dependency} to be healthy, but it has no healthcheck"
                )


# --- the dgm image ------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines = [
        line
        for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()
        if not line.lstrip().startswith("#")
    ]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    instructions = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            instructions.append((keyword.upper(), rest.strip()))
    return instructions


def dockerfile_arg(name: str) -> str:
    for keyword, rest in dockerfile_instructions():
        if keyword == "ARG" and rest.startswith(name + "="):
            return rest.split("=", 1)[1].strip().strip('"')
    raise AssertionError(f"Dockerfile has no ARG {name}=<default>")


def test_dockerfile_builds_python_with_jre_and_installs_the_project() -> None:
    assert DOCKERFILE.is_file()
    instructions = dockerfile_instructions()
    base = [rest for keyword, rest in instructions if keyword == "FROM"]
    assert len(base) == 1 and base[0].startswith("python:3.11-slim"), base
    runs = [rest for keyword, rest in instructions if keyword == "RUN"]
    assert any(
        "apt-get install" in run and re.search(r"\bopenjdk-17-jre-headless\b", run) for run in runs
    ), "no headless JRE 17 installed (pyspark's driver needs Java)"

    copies = [shlex.split(rest) for keyword, rest in instructions if keyword == "COPY"]
    workdir = "/"
    context_dirs = set()  # where in the image the whole build context lands
    for keyword, rest in instructions:
        if keyword == "WORKDIR":
            workdir = str(PurePosixPath(workdir, rest))
        if keyword == "COPY" and shlex.split(rest)[:1] == ["."]:
            context_dirs.add(str(PurePosixPath(workdir, shlex.split(rest)[-1])))
        if keyword == "RUN" and "pip install" in rest:
            targets = {
                str(PurePosixPath(workdir, arg))
                for arg in shlex.split(rest)
                if arg == "." or arg.startswith(("/", "./"))
            }
            if targets & context_dirs:
                break
    else:
        raise AssertionError(f"no `pip install` of the copied project; COPY: {copies}")
    # Compose commands start with `dgm` itself: an ENTRYPOINT would turn them into arguments.
    assert not [rest for keyword, rest in instructions if keyword == "ENTRYPOINT"]


def test_dockerfile_runs_as_the_spark_images_uid() -> None:
    """The state volume is shared with Spark executors, which run as uid 185 ("spark")."""
    instructions = dockerfile_instructions()
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    match = re.search(r"useradd\b[^&;]*--uid[ =]185\b[^&;]*\s(\w+)\s*(?:&&|;|$)", runs)
    assert match, "no user with uid 185 created"
    assert users and users[-1] in (match[1], "185"), f"image does not run as it: USER {users}"
    assert re.search(rf"chown\b[^&;]*\b{match[1]}\b[^&;]*\s{STATE_DIR}\b", runs), (
        f"{STATE_DIR} is not owned by {match[1]} (a new named volume copies its owner)"
    )


def dockerignore_patterns() -> list[str]:
    if not DOCKERIGNORE.exists():
        return []
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore drops `path` (or a directory above it); last match wins."""
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[: index + 1]) for index in range(len(parts))]
    verdict = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        regex = pattern.replace("**/", "")  # close enough for the patterns we write
        if any(
            fnmatch(candidate, pattern) or fnmatch(candidate, regex) for candidate in candidates
        ):
            verdict = not negate
    return verdict


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "dgm/__init__.py",
        "shell/cli.py",
        "collectors/__init__.py",
        "spark_jobs/__init__.py",
        "alerts/__init__.py",
        "dashboard/__init__.py",
        "lab/__init__.py",
        "embedded_kafka/__init__.py",
        "embedded_kafka/locks/kafka-4.4.0.lock",
    ],
)
def test_dockerignore_keeps_what_pip_install_needs(path: str) -> None:
    assert not ignored(path, dockerignore_patterns()), f".dockerignore drops {path}"


def test_dockerignore_helper_sees_exclusions() -> None:
    assert ignored("tests/test_x.py", ["tests"])
    assert ignored("dgm/__pycache__/cli.pyc", ["**/__pycache__"])
    assert not ignored("dgm/cli.py", ["tests", "**/__pycache__"])
    assert not ignored("README.md", ["*.md", "!README.md"])


# --- the dgm services ----------------------------------------------------------------------


def registered_subcommands(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    raise AssertionError("dgm's parser has no subcommands")


def subcommand_of(argv: list[str]) -> str:
    """The first word after dgm's global options (`--config PATH`, `-v`)."""
    index = 0
    while index < len(argv) and argv[index].startswith("-"):
        index += 2 if argv[index] == "--config" else 1
    assert index < len(argv), f"no subcommand in {argv}"
    return argv[index]


def test_pending_lists_only_subcommands_compose_uses() -> None:
    assert set(PENDING) <= set(DGM_SERVICES.values()), "stale PENDING entry"


@pytest.mark.parametrize("name", sorted(DGM_SERVICES))
def test_dgm_command_resolves_to_a_real_subcommand(
    name: str, services: dict[str, dict[str, Any]]
) -> None:
    from shell.cli import build_parser

    argv = command(services[name])
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert argv[0] == "dgm" and argv[0] in scripts, f"{name} does not run the dgm script: {argv}"
    subcommand = subcommand_of(argv[1:])
    assert subcommand == DGM_SERVICES[name]

    parser = build_parser()
    if subcommand in PENDING:
        assert subcommand not in registered_subcommands(parser), (
            f"`dgm {subcommand}` is registered now (issue #{PENDING[subcommand]}): remove it "
            "from PENDING in tests/test_docker_compose.py so the compose command is parsed"
        )
        return
    try:
        args = parser.parse_args(argv[1:])
    except SystemExit as exit_:
        pytest.fail(f"{name}: `{shlex.join(argv)}` is rejected by dgm's CLI (exit {exit_.code})")
    assert args.command == subcommand
    assert args.config == CONFIG_IN_CONTAINER
    if subcommand == "lab":
        assert args.action == "demo", "demo-pipelines runs the continuous lab until stopped"
    assert callable(getattr(args, "handler", None)), f"`dgm {subcommand}` sets no handler"


def test_dgm_services_build_from_the_repository_dockerfile(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in DGM_SERVICES:
        build = services[name].get("build")
        assert build is not None, f"{name} is not built from the repository"
        context, dockerfile = (
            (build, "Dockerfile")
            if isinstance(build, str)
            else (build.get("context", "."), build.get("dockerfile", "Dockerfile"))
        )
        assert (ROOT / context / dockerfile).resolve() == DOCKERFILE, (name, build)


def test_dgm_services_share_one_state_volume_and_the_config(
    services: dict[str, dict[str, Any]],
) -> None:
    state_volumes = set()
    for name in DGM_SERVICES:
        service_mounts = mounts(services[name])
        state = [m for m in service_mounts if m.target == STATE_DIR]
        assert len(state) == 1 and state[0].kind == "volume", f"{name}: {service_mounts}"
        state_volumes.add(state[0].source)
        config = [m for m in service_mounts if m.target == CONFIG_IN_CONTAINER]
        assert len(config) == 1, f"{name} does not mount {CONFIG_IN_CONTAINER}"
        assert config[0].read_only, f"{name} mounts the config writable"
        assert (ROOT / config[0].source).resolve() == DGM_CONFIG
        assert option(command(services[name]), "--config") == CONFIG_IN_CONTAINER
    assert len(state_volumes) == 1, f"dgm services use different state volumes: {state_volumes}"
    # Spark executors read and write the same paths as the driver in `analysis`.
    worker = [m for m in mounts(services[SPARK_WORKER]) if m.target == STATE_DIR]
    assert [m.source for m in worker] == list(state_volumes), "spark-worker lacks the state"


def test_dashboard_is_published_on_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    dashboard = services["dashboard"]
    argv = command(dashboard)
    port = option(argv, "--port")
    assert option(argv, "--host") == "0.0.0.0", "unreachable through the published port"
    assert ports(dashboard) == [Port(LOOPBACK, "8501", "8501")] and port == "8501"


def test_services_wait_for_what_they_need(services: dict[str, dict[str, Any]]) -> None:
    healthy_kafka = dict.fromkeys(KAFKA_BROKERS, "service_healthy")
    for name in ("collectors", "watch", "analysis", "demo-pipelines"):
        assert healthy_kafka.items() <= depends_on(services[name]).items(), name
    analysis = depends_on(services["analysis"])
    assert analysis.get(SPARK_MASTER) == analysis.get(SPARK_WORKER) == "service_healthy"
    assert depends_on(services[SPARK_WORKER]).get(SPARK_MASTER) == "service_healthy"
    assert depends_on(services["prometheus"]) == {
        "exporter": "service_healthy",
        "alertmanager": "service_healthy",
    }
    assert depends_on(services["grafana"]) == {"prometheus": "service_healthy"}


def test_every_dependency_waits_for_health(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for dependency, condition in depends_on(service).items():
            assert condition == "service_healthy", f"{name} starts once {dependency} started"


# --- health checks and logs -----------------------------------------------------------------


def test_every_service_has_a_health_check(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        check = service.get("healthcheck") or {}
        assert not check.get("disable"), f"{name} disables its health check"
        argv = healthcheck(service)  # a well-formed test
        assert argv, name
        for key in ("interval", "timeout", "retries", "start_period"):
            assert key in check, f"{name}'s health check has no {key}"


def test_every_service_logs_with_rotation(services: dict[str, dict[str, Any]]) -> None:
    """Docker's json-file driver keeps every line forever unless told a size."""
    for name, service in services.items():
        logging = service.get("logging") or {}
        assert logging.get("driver") == "json-file", f"{name}: {logging}"
        options = logging.get("options") or {}
        assert re.fullmatch(r"\d+[km]", str(options.get("max-size", ""))), f"{name}: {options}"
        assert int(options.get("max-file", 0)) >= 2, f"{name}: {options}"


def health_url(service: dict[str, Any]) -> str:
    """The one http://127.0.0.1:PORT/... URL a health check asks."""
    (url,) = re.findall(r"http://127\.0\.0\.1:\d+/[^\s\"']*", " ".join(healthcheck(service)))
    return str(url)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("dashboard", "/_stcore/health"),  # Streamlit's own, as shell.stack.dashboard_answers
        ("exporter", "/healthz"),
        (SPARK_MASTER, "/json/"),
        (SPARK_WORKER, "/json/"),
        ("prometheus", "/-/healthy"),
        ("alertmanager", "/-/healthy"),
        ("grafana", "/api/health"),
    ],
)
def test_http_health_checks_ask_the_services_own_port(
    services: dict[str, dict[str, Any]], name: str, path: str
) -> None:
    service = services[name]
    listening = {
        SPARK_MASTER: option(command(services[SPARK_MASTER]), "--webui-port"),
        SPARK_WORKER: option(command(services[SPARK_WORKER]), "--webui-port"),
        "dashboard": option(command(services["dashboard"]), "--port"),
        "exporter": option(command(services["exporter"]), "--port"),
    }.get(name) or next(port.target for port in ports(service))
    assert health_url(service) == f"http://127.0.0.1:{listening}{path}"


def run_health_check(
    service: dict[str, Any], replacements: Mapping[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """A dgm-image health check run here: its `python` is this interpreter's folder's."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
    }
    argv = in_test(healthcheck(service), replacements)
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def config_for(state_dir: Path, text: str = "") -> Path:
    """A dgm.toml standing in for /etc/dgm/dgm.toml, its state_dir a test folder."""
    path = state_dir.parent / "dgm.toml"
    path.write_text(f'state_dir = "{state_dir}"\n{text}')
    return path


def test_exporter_health_check_passes_while_it_serves(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    from exporter.server import ExporterServer

    server = ExporterServer(("127.0.0.1", 0), tmp_path)  # nothing published: still healthy
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    port = {EXPORTER_PORT: str(server.port)}
    try:
        passed = run_health_check(services["exporter"], port, tmp_path)
        assert passed.returncode == 0, passed.stderr
    finally:
        server.shutdown()
        server.server_close()
        serving.join(10)
    assert run_health_check(services["exporter"], port, tmp_path).returncode != 0


def test_collectors_health_check_wants_a_recent_sample(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    from dgm.contracts.samples import SampleStore

    state = tmp_path / "state"
    config = {CONFIG_IN_CONTAINER: str(config_for(state, "[collectors]\ninterval_s = 10\n"))}
    check = services["collectors"]
    assert run_health_check(check, config, tmp_path).returncode == 1  # no sample yet
    written = SampleStore(state).write("offsets", [])
    assert run_health_check(check, config, tmp_path).returncode == 0
    old = time.time() - 120  # the name says when it was written: an older name, the same file
    written.rename(written.with_name(f"{int(old * 1000):013d}-000000.parquet"))
    assert run_health_check(check, config, tmp_path).returncode == 1


def test_analysis_health_check_wants_a_fresh_publication(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    from tests.support.published_world.publish import build

    state = tmp_path / "state"
    config = {CONFIG_IN_CONTAINER: str(config_for(state, "[analysis]\ninterval_s = 10\n"))}
    check = services["analysis"]
    assert run_health_check(check, config, tmp_path).returncode == 1  # nothing published
    build(state, finished_ago_s=20)
    assert run_health_check(check, config, tmp_path).returncode == 0
    build(state, finished_ago_s=600)  # stale: older than max(3 x 10 s, 60 s)
    assert run_health_check(check, config, tmp_path).returncode == 1


def test_demo_pipelines_health_check_wants_every_ledger_growing(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    lab = tmp_path / "state" / "lab"
    state = {STATE_DIR: str(tmp_path / "state")}
    check = services["demo-pipelines"]
    assert run_health_check(check, state, tmp_path).returncode == 1  # nothing produced yet
    ledgers = [lab / name / "ledger.jsonl" for name in ("demo-a", "demo-b")]
    for ledger in ledgers:
        ledger.parent.mkdir(parents=True)
        ledger.write_text("{}\n")
    assert run_health_check(check, state, tmp_path).returncode == 0
    os.utime(ledgers[1], (time.time() - 600, time.time() - 600))  # one producer stopped
    assert run_health_check(check, state, tmp_path).returncode == 1


def test_demo_pipelines_only_run_with_the_demo_profile(
    services: dict[str, dict[str, Any]],
) -> None:
    assert services["demo-pipelines"].get("profiles") == ["demo"]
    for name in MONITORING:
        assert services[name].get("profiles") == ["monitoring"], name
    for name, service in services.items():
        if name != "demo-pipelines" and name not in MONITORING:
            assert not service.get("profiles"), f"{name} would not start by default"


# --- the exporter and the monitoring profile ------------------------------------------------


def test_exporter_is_published_on_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    exporter = services["exporter"]
    argv = command(exporter)
    assert option(argv, "--host") == "0.0.0.0", "unreachable through the published port"
    assert option(argv, "--port") == EXPORTER_PORT
    assert ports(exporter) == [Port(LOOPBACK, EXPORTER_PORT, EXPORTER_PORT)]


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> the repository file or folder bound there (each must exist)."""
    found = {}
    for mount in mounts(service):
        if mount.kind == "bind":
            source = (ROOT / mount.source).resolve()
            assert source.exists(), f"{mount.source} is mounted but does not exist"
            assert mount.read_only, f"{mount.source} is mounted writable"
            found[mount.target] = source
    return found


def test_monitoring_services_mount_existing_deploy_files(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in MONITORING:
        service = services[name]
        assert "image" in service and "build" not in service, name
        assert all(port.host_ip == LOOPBACK for port in ports(service)), name
        sources = bind_mounts(service).values()
        assert sources and all(ROOT / "deploy" in s.parents for s in sources), name


def test_prometheus_scrapes_the_exporter_and_loads_the_mounted_rules(
    services: dict[str, dict[str, Any]],
) -> None:
    prometheus = services["prometheus"]
    files = bind_mounts(prometheus)
    config_file = option(command(prometheus), "--config.file")
    assert config_file in files, f"{config_file} is not mounted"
    config = yaml.safe_load(files[config_file].read_text())
    for rules in config["rule_files"]:
        assert rules in files, f"rule file {rules} is not mounted"
    targets = [
        target
        for job in config["scrape_configs"]
        for static in job.get("static_configs", [])
        for target in static["targets"]
    ]
    assert f"exporter:{option(command(services['exporter']), '--port')}" in targets


def test_prometheus_sends_alerts_to_the_profiles_alertmanager(
    services: dict[str, dict[str, Any]],
) -> None:
    prometheus = services["prometheus"]
    files = bind_mounts(prometheus)
    config = yaml.safe_load(files[option(command(prometheus), "--config.file") or ""].read_text())
    (alertmanagers,) = config["alerting"]["alertmanagers"]
    targets = [t for static in alertmanagers["static_configs"] for t in static["targets"]]
    alertmanager = services["alertmanager"]
    assert str(alertmanager["image"]).startswith("prom/alertmanager:v")
    (port,) = ports(alertmanager)
    assert targets == [f"alertmanager:{port.target}"] and port.host_ip == LOOPBACK


def test_alertmanager_routes_everything_to_a_webhook_placeholder(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    alertmanager = services["alertmanager"]
    files = bind_mounts(alertmanager)
    config_file = option(command(alertmanager), "--config.file")
    assert config_file in files and files[config_file] == ALERTMANAGER_CONFIG
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    receivers = {r["name"]: r for r in config["receivers"]}
    (webhook,) = receivers[config["route"]["receiver"]]["webhook_configs"]
    # A placeholder that resolves nowhere (RFC 2606), to be replaced: not somebody's server.
    assert re.fullmatch(r"https?://[\w.-]+\.invalid(/.*)?", webhook["url"]), webhook
    assert webhook.get("send_resolved") is True
    amtool = shutil.which("amtool")
    if amtool is None:
        return  # Debian's prometheus-alertmanager package provides it
    checked = subprocess.run(
        [amtool, "check-config", str(ALERTMANAGER_CONFIG)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_grafana_takes_its_admin_password_from_the_environment_and_has_no_default(
    services: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    grafana = services["grafana"]
    password = environment(grafana)["GF_SECURITY_ADMIN_PASSWORD"]
    assert re.fullmatch(r"\$\{GRAFANA_ADMIN_PASSWORD(:-)?\}", password), password
    # ${VAR:?} would stop every `docker compose up`: Compose interpolates the services of
    # profiles that are off too. So the check is Grafana's own, when it starts.
    for name, service in services.items():
        if service.get("profiles"):
            assert ":?" not in yaml.safe_dump(service), f"{name} would break a plain up"
        for key, value in environment(service).items():
            if re.search(r"PASSWORD|SECRET|TOKEN", key):
                assert re.fullmatch(r"\$\{\w+(:?-)?\}", value), f"{name}: {key} has a default"

    entrypoint = [interpolate(part, {}) for part in grafana["entrypoint"]]
    assert entrypoint[:2] == ["sh", "-c"] and entrypoint[2].endswith("exec /run.sh")
    script = entrypoint[2].replace("exec /run.sh", "exec echo starts")  # the image's /run.sh
    for given, code, said in (("", 1, "set GRAFANA_ADMIN_PASSWORD"), ("s3cret", 0, "starts")):
        env = {"PATH": os.environ["PATH"], "GRAFANA_ADMIN_PASSWORD": given}
        env["GF_SECURITY_ADMIN_PASSWORD"] = interpolate(password, env)
        done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)
        assert (done.returncode, said in done.stdout + done.stderr) == (code, True), done


def test_compose_keeps_the_dashboards_edits_off() -> None:
    from dgm.config.loader import load_config

    text = DGM_CONFIG.read_text(encoding="utf-8")
    assert tomllib.loads(text)["dashboard"]["allow_edits"] is False
    assert load_config(DGM_CONFIG).dashboard.allow_edits is False


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard(
    services: dict[str, dict[str, Any]],
) -> None:
    files = bind_mounts(services["grafana"])
    provisioning = files["/etc/grafana/provisioning"]
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == "http://prometheus:9090"
    assert any(port.target == "9090" for port in ports(services["prometheus"]))
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "dgm.yml").read_text())["providers"]
    folder = PurePosixPath(provider["options"]["path"])
    dashboards = [t for t in files if PurePosixPath(t).parent == folder]
    assert [files[t] for t in dashboards] == [ROOT / "deploy" / "grafana" / "dgm.json"]


# --- Spark ----------------------------------------------------------------------------------


def spark_core_jar() -> Path:
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None, "pyspark (a dependency) is missing"
    jars = sorted((Path(spec.origin).parent / "jars").glob("spark-core_2.13-*.jar"))
    assert len(jars) == 1, f"expected one spark-core_2.13 jar in pyspark, found {jars}"
    return jars[0]


def spark_class(argv: list[str]) -> str:
    assert argv[0] == "spark-class", f"not pyspark's spark-class (found on PATH): {argv}"
    return argv[1]


# What would give the executors another Python, other packages or another Spark than the
# driver's: an interpreter or Spark chosen by environment, a venv, an install elsewhere.
PYTHON_CHOOSERS = {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "PATH"}
PYTHON_CHOOSERS |= {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX"}
PIP_ELSEWHERE = ("--target", "-t ", "--prefix", "--root", "--user", "--python")


def test_driver_and_executors_share_one_image_one_python_one_set_of_packages(
    services: dict[str, dict[str, Any]],
) -> None:
    """The analysis's mapInArrow code runs in the executors' Python workers with numpy,
    pandas and pyarrow: the Spark master and worker run the dgm image itself (pyspark's
    spark-class), whose one Python, found by PATH, is the one pip installed everything into."""
    driver = services["analysis"]
    for name in (SPARK_MASTER, SPARK_WORKER):
        service = services[name]
        assert service.get("image") == driver["image"], f"{name} runs {service.get('image')}"
        assert service.get("build") == driver["build"], f"{name} is not built as the driver"
        spark_class(command(service))
    for name in (SPARK_MASTER, SPARK_WORKER, "analysis"):
        chosen = PYTHON_CHOOSERS & set(environment(services[name]))
        assert not chosen, f"{name} sets {chosen}: the executors could run another Python"
        assert "entrypoint" not in services[name], f"{name} replaces the image's entrypoint"

    instructions = dockerfile_instructions()
    assert [keyword for keyword, _ in instructions].count("FROM") == 1, "one stage, one Python"
    for keyword, rest in instructions:
        if keyword == "ENV":
            names = set(re.findall(r"(?:^|\s)([A-Z_][A-Z0-9_]*)=", rest))
            assert not names & PYTHON_CHOOSERS, f"the image sets {names & PYTHON_CHOOSERS}"
        if keyword == "RUN":
            assert not re.search(r"\b(venv|virtualenv|conda|pipx|uv)\b", rest), rest
            for install in re.findall(r"pip install[^&;]*", rest):
                assert not any(flag in install for flag in PIP_ELSEWHERE), install
    runs = [rest for keyword, rest in instructions if keyword == "RUN"]
    assert any("pip install" in run and "pyspark==${SPARK_VERSION}" in run for run in runs)
    version = dockerfile_arg("SPARK_VERSION")
    pinned = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"pyspark=={version}" in pinned, f"the image's pyspark {version} is not {pinned}"
    assert "pip install" in " ".join(runs) and "constraints.txt" in " ".join(runs)


@pytest.mark.parametrize("name", sorted(SPARK_CLASSES))
def test_spark_command_names_a_class_spark_has(
    name: str, services: dict[str, dict[str, Any]]
) -> None:
    main_class = spark_class(command(services[name]))
    assert main_class == SPARK_CLASSES[name]
    with zipfile.ZipFile(spark_core_jar()) as jar:
        assert main_class.replace(".", "/") + ".class" in set(jar.namelist()), (
            f"{main_class} is not in {jar.filename}"
        )


def spark_master_url(services: dict[str, dict[str, Any]]) -> str:
    argv = command(services[SPARK_MASTER])
    host = option(argv, "--host") or option(argv, "-h")
    assert host in (None, SPARK_MASTER), f"master binds {host}, not {SPARK_MASTER}"
    return f"spark://{SPARK_MASTER}:{option(argv, '--port') or '7077'}"


def test_worker_and_analysis_name_the_master(services: dict[str, dict[str, Any]]) -> None:
    url = spark_master_url(services)
    worker_argv = command(services[SPARK_WORKER])
    worker_urls = [arg for arg in worker_argv if arg.startswith("spark://")]
    assert worker_urls == [url], f"worker connects to {worker_urls}, master listens on {url}"
    assert option(command(services["analysis"]), "--master") == url


def test_spark_master_ui_on_loopback_8080(services: dict[str, dict[str, Any]]) -> None:
    ui_port = option(command(services[SPARK_MASTER]), "--webui-port") or "8080"
    assert ports(services[SPARK_MASTER]) == [Port(LOOPBACK, "8080", ui_port)]


# --- Kafka ----------------------------------------------------------------------------------


class Listener(NamedTuple):
    name: str
    host: str
    port: str


def listeners(value: str) -> dict[str, Listener]:
    found = {}
    for item in value.split(","):
        match = re.fullmatch(r"([A-Z_]+)://([^:]*):(\d+)", item.strip())
        assert match, f"not a listener: {item!r}"
        found[match[1]] = Listener(match[1], match[2], match[3])
    return found


@pytest.fixture(scope="module")
def brokers(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Kafka service name -> its environment."""
    found = {
        name: environment(service)
        for name, service in services.items()
        if str(service.get("image", "")).startswith("apache/kafka")
    }
    assert tuple(sorted(found)) == KAFKA_BROKERS
    return found


def test_brokers_run_the_official_image_in_combined_mode(
    services: dict[str, dict[str, Any]], brokers: dict[str, dict[str, str]]
) -> None:
    for name, env in brokers.items():
        assert services[name]["image"] == KAFKA_IMAGE
        assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}, name


def test_node_ids_unique_and_quorum_voters_are_exactly_the_brokers(
    services: dict[str, dict[str, Any]], brokers: dict[str, dict[str, str]]
) -> None:
    node_ids = {name: int(env["KAFKA_NODE_ID"]) for name, env in brokers.items()}
    assert sorted(node_ids.values()) == [1, 2, 3]
    voter_lists = {env["KAFKA_CONTROLLER_QUORUM_VOTERS"] for env in brokers.values()}
    assert len(voter_lists) == 1, f"brokers disagree on the voters: {voter_lists}"
    voters = {}
    for voter in voter_lists.pop().split(","):
        match = re.fullmatch(r"(\d+)@([\w.-]+):(\d+)", voter.strip())
        assert match, f"not a voter: {voter!r}"
        assert int(match[1]) not in voters, f"node {match[1]} votes twice"
        voters[int(match[1])] = (match[2], match[3])
    assert set(voters) == set(node_ids.values())
    for name, node_id in node_ids.items():
        host, port = voters[node_id]
        assert host in (name, services[name].get("hostname")), f"voter {node_id} is {host}"
        env = brokers[name]
        controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
        assert listeners(env["KAFKA_LISTENERS"])[controller].port == port, name


def test_brokers_share_one_valid_cluster_id(brokers: dict[str, dict[str, str]]) -> None:
    cluster_ids = {env.get("CLUSTER_ID") for env in brokers.values()}
    assert len(cluster_ids) == 1, f"brokers format different clusters: {cluster_ids}"
    cluster_id = cluster_ids.pop()
    assert cluster_id and len(cluster_id) == 22, cluster_id  # a base64url UUID, unpadded
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def test_replication_settings(brokers: dict[str, dict[str, str]]) -> None:
    for name, env in brokers.items():
        for key, value in REPLICATION.items():
            assert env.get(key) == value, f"{name}: {key}={env.get(key)}, expected {value}"
        # One broker may be down with acks=all still succeeding.
        assert int(env["KAFKA_MIN_INSYNC_REPLICAS"]) < int(env["KAFKA_DEFAULT_REPLICATION_FACTOR"])
        assert int(env["KAFKA_DEFAULT_REPLICATION_FACTOR"]) <= len(brokers)


def test_listeners_internal_and_external_on_loopback(
    services: dict[str, dict[str, Any]], brokers: dict[str, dict[str, str]]
) -> None:
    host_ports = set()
    for name, env in brokers.items():
        bound = listeners(env["KAFKA_LISTENERS"])
        advertised = listeners(env["KAFKA_ADVERTISED_LISTENERS"])
        protocols = dict(
            item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
        )
        assert set(bound) <= set(protocols), f"{name}: listeners without a protocol"
        assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in bound
        assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] not in advertised
        assert set(advertised) == {"PLAINTEXT", "EXTERNAL"}
        assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "PLAINTEXT"
        # Inside the compose network: the service's own name, on the port it listens on.
        assert advertised["PLAINTEXT"] == Listener("PLAINTEXT", name, bound["PLAINTEXT"].port)
        # On the host: loopback, on a port that is published to the EXTERNAL listener.
        external = advertised["EXTERNAL"]
        assert external.host == LOOPBACK, f"{name} advertises {external}"
        assert Port(LOOPBACK, external.port, bound["EXTERNAL"].port) in ports(services[name])
        host_ports.add(external.port)
    assert host_ports == {"19092", "19093", "19094"}


def test_each_broker_keeps_its_log_in_its_own_volume(
    services: dict[str, dict[str, Any]], brokers: dict[str, dict[str, str]]
) -> None:
    sources = set()
    for name, env in brokers.items():
        log_dirs = env["KAFKA_LOG_DIRS"]
        data = [m for m in mounts(services[name]) if m.target == log_dirs]
        assert len(data) == 1 and data[0].kind == "volume", f"{name}: {log_dirs} not a volume"
        sources.add(data[0].source)
    assert len(sources) == len(brokers), f"brokers share a log volume: {sources}"


def test_broker_healthcheck_uses_the_images_own_tool(
    services: dict[str, dict[str, Any]], brokers: dict[str, dict[str, str]]
) -> None:
    for name, env in brokers.items():
        test = services[name]["healthcheck"]["test"]
        argv = shlex.split(test) if isinstance(test, str) else list(test)
        argv = argv[1:] if argv[0] in ("CMD", "CMD-SHELL") else argv
        if len(argv) == 1:
            argv = shlex.split(argv[0])
        assert argv[0] == "/opt/kafka/bin/kafka-broker-api-versions.sh", name
        bootstrap = option(argv, "--bootstrap-server")
        assert bootstrap is not None, f"{name}: no --bootstrap-server"
        _, port = bootstrap.rsplit(":", 1)
        client_ports = {
            listener.port
            for listener in listeners(env["KAFKA_LISTENERS"]).values()
            if listener.name != env["KAFKA_CONTROLLER_LISTENER_NAMES"]
        }
        assert port in client_ports, f"{name}: health check asks port {port}"


# --- deploy/dgm.compose.toml ------------------------------------------------------------------


def config_tables(document: dict[str, Any], path: str = "") -> Iterator[tuple[str, set[str]]]:
    """(table path, its keys) for each table, arrays of tables included."""
    yield path, set(document)
    for key, value in document.items():
        child = f"{path}.{key}" if path else key
        if child == "cluster.client":
            continue  # pass-through client settings: any librdkafka key
        tables = value if isinstance(value, list) else [value]
        for table in tables:
            if isinstance(table, dict):
                yield from config_tables(table, child)


def example_pipeline(text: str) -> str:
    """The commented-out [[pipelines]] example, uncommented."""
    lines = text.splitlines()
    start = lines.index("# [[pipelines]]")
    block = []
    for line in lines[start:]:
        if not line.startswith("# "):
            break
        block.append(line[2:])
    return "\n".join(block) + "\n"


def test_config_uses_only_known_keys_and_names_the_brokers(
    brokers: dict[str, dict[str, str]],
) -> None:
    text = DGM_CONFIG.read_text(encoding="utf-8")
    document = tomllib.loads(text)
    example = tomllib.loads(example_pipeline(text))
    assert len(example["pipelines"]) == 1
    for table, keys in [*config_tables(document), *config_tables(example)]:
        assert keys <= CONFIG_KEYS[table], f"unknown keys in [{table}]: {keys - CONFIG_KEYS[table]}"
    assert document["state_dir"] == STATE_DIR
    internal = {
        f"{listener.host}:{listener.port}"
        for env in brokers.values()
        for listener in [listeners(env["KAFKA_ADVERTISED_LISTENERS"])["PLAINTEXT"]]
    }
    assert set(document["cluster"]["bootstrap_servers"].split(",")) == internal


def test_config_loads_with_dgm_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if importlib.util.find_spec("dgm.config.loader") is None:
        pytest.skip("dgm.config.loader is not written yet")
    from dgm.config.loader import load_config

    monkeypatch.delenv("DGM_STATE_DIR", raising=False)
    monkeypatch.delenv("DGM_BOOTSTRAP", raising=False)
    config = load_config(DGM_CONFIG)
    assert str(config.state_dir) == STATE_DIR
    assert config.cluster.bootstrap_servers == "kafka-1:9092,kafka-2:9092,kafka-3:9092"

    text = DGM_CONFIG.read_text(encoding="utf-8")
    with_example = tmp_path / "dgm.toml"
    with_example.write_text(text + "\n" + example_pipeline(text), encoding="utf-8")
    pipelines = {p.name: p for p in load_config(with_example).pipelines}
    assert "orders-enrichment" in pipelines


def test_demo_pipelines_run_the_continuous_lab_on_declared_pipelines(
    services: dict[str, dict[str, Any]],
) -> None:
    """`dgm lab demo` cannot add its pipelines to the read-only config: each one it runs
    must be declared there, with the topics and group the lab gives it."""
    from lab.continuous import DEMO_PIPELINES
    from lab.pipeline import DECLARED, PipelineNames, has_sink_topic
    from shell.cli import build_parser

    argv = command(services["demo-pipelines"])
    args = build_parser().parse_args(argv[1:])
    assert (args.command, args.action) == ("lab", "demo"), argv
    assert args.bootstrap is None, "the lab must use the config's cluster, like the others"
    run = set(args.pipeline or [p.name for p in DEMO_PIPELINES])
    declared = {p["name"]: p for p in tomllib.loads(DGM_CONFIG.read_text())["pipelines"]}
    modes = {p.name: p for p in DEMO_PIPELINES}
    for name in sorted(run):
        assert name in declared, f"{name} runs in demo-pipelines but is not in {DGM_CONFIG}"
        demo, names = modes[name], PipelineNames.fixed(name)
        assert not demo.drop_acks, f"{name} needs the embedded broker's FAULT listener"
        assert has_sink_topic(demo.mode), f"{name}: its external sink is not in the volume yet"
        assert declared[name] == {
            "name": name,
            "source_topics": [names.source],
            "sink_topics": [names.sink],
            "consumer_group": names.group,
            "declared_semantic": DECLARED[demo.mode],
        }
