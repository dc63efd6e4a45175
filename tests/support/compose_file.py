"""docker-compose.yml read for the tests that check it (tests/test_docker_compose.py) and the
tests that run what its services run (the Spark cluster in
tests/scenarios/test_standalone_cluster.py, the health checks).

A command taken from the file keeps its program and every argument; only the compose
network's addresses and the containers' paths are replaced for a test on one machine
(`in_test`): a service name by 127.0.0.1, a fixed port by a free one, /etc/dgm/dgm.toml or
/tmp/... by a file or folder of the test's own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"


def compose_services() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(document, dict), "docker-compose.yml is not a mapping"
    services = document.get("services")
    assert isinstance(services, dict), "docker-compose.yml has no services"
    return services


def command(service: dict[str, Any]) -> list[str]:
    raw = service.get("command")
    assert raw, f"no command in {service}"
    return shlex.split(raw) if isinstance(raw, str) else [str(part) for part in raw]


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Compose's interpolation of ${VAR}, ${VAR:-default} and $$ (a literal $)."""

    def value(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        name, default = match[1], match[3] or ""
        return (env.get(name) or default) if match[2] else env.get(name, "")

    return re.sub(r"\$\$|\$\{(\w+)(:-([^}]*))?\}", value, text)


def healthcheck(service: dict[str, Any]) -> list[str]:
    """The health check's argv, as Docker runs it: CMD's list as is; CMD-SHELL's (or a plain
    string) through /bin/sh -c; after Compose's interpolation ($$ is a $)."""
    test = service["healthcheck"]["test"]
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    kind, *argv = [interpolate(str(part), {}) for part in test]
    assert kind in ("CMD", "CMD-SHELL"), f"health check test starts with {kind!r}"
    return argv if kind == "CMD" else ["/bin/sh", "-c", " ".join(argv)]


def in_test(argv: list[str], replacements: Mapping[str, str]) -> list[str]:
    """argv with each key of `replacements` (a host name, a port, a container path) replaced
    wherever it stands as a whole word, inside URLs and code too."""
    if not replacements:
        return list(argv)
    keys = sorted(replacements, key=len, reverse=True)
    pattern = re.compile("|".join(rf"(?<![\w.-]){re.escape(key)}(?![\w-])" for key in keys))
    return [pattern.sub(lambda match: replacements[match[0]], arg) for arg in argv]
