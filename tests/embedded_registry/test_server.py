"""The embedded registry: a real Apicurio Registry that listens on loopback only, demands its
credentials under /apis, logs to its file, and leaves no process behind when stopped."""

from __future__ import annotations

import base64
import os
import socket
import stat
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from embedded_kafka import processes
from embedded_kafka.jar_cache import COMPLETE_MARKER
from embedded_registry.distribution import RegistryDistribution
from embedded_registry.server import EmbeddedRegistry, RegistryError

# These start a registry of their own (a JVM): not for the tier that starts none.
pytestmark = pytest.mark.schema_registry

PASSWORD = "registry-secret-0451"


def status(url: str, credentials: tuple[str, str] | None = None) -> int:
    request = urllib.request.Request(url)
    if credentials is not None:
        pair = ":".join(credentials).encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(pair).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket of the process, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address, port = fields[1].split(":")
                found.add((_address(address), int(port, 16)))
    return found


def _address(hexadecimal: str) -> str:
    """/proc/net/tcp's address: IPv4 little-endian, or IPv6 (loopback as IPv4-mapped)."""
    if len(hexadecimal) == 32 and hexadecimal[:24] != "0000000000000000FFFF0000":
        return f"ipv6 {hexadecimal}"
    return ".".join(str(b) for b in bytes.fromhex(hexadecimal[-8:])[::-1])


def refuses(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_binds_loopback_demands_credentials_and_stops_clean(tmp_path: Path) -> None:
    registry = EmbeddedRegistry(tmp_path / "registry", basic_auth=("dgm", PASSWORD))
    started = time.monotonic()
    registry.start()
    try:
        print(f"registry ready in {time.monotonic() - started:.1f}s at {registry.url}")
        assert registry.process is not None
        pid = registry.process.pid
        assert processes.find_pids(registry.marker) == [pid]
        assert listening(pid) == {("127.0.0.1", registry.port)}
        # Health stays open (readiness); every API demands the credentials.
        assert status(f"{registry.url}/health/ready") == 200
        for api in (registry.ccompat_url + "/subjects", registry.apicurio_url + "/system/info"):
            assert status(api) == 401
            assert status(api, ("dgm", "wrong")) == 401
            assert status(api, ("dgm", PASSWORD)) == 200
        # The password is in a file only its owner reads, never on a command line.
        assert PASSWORD.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        config = registry.folder / "config" / "application.properties"
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert "apicurio-registry.access" in registry.log_file.read_text()
    finally:
        killed = registry.stop()
    assert killed == []  # SIGTERM sufficed: a clean shutdown
    assert processes.find_pids(registry.marker) == []
    assert registry.process is None
    assert refuses(registry.port)
    assert registry.stop() == []  # idempotent


def test_a_registry_that_cannot_start_fails_fast_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DGM_CACHE_DIR", str(tmp_path / "cache"))
    distribution = RegistryDistribution("9.9.9", RegistryDistribution.pinned().lock)
    runner = distribution.app / "apicurio-registry-app-3.0.9-runner.jar"
    runner.parent.mkdir(parents=True)
    runner.write_bytes(b"not a jar")
    (distribution.root / COMPLETE_MARKER).write_text("9.9.9")
    registry = EmbeddedRegistry(tmp_path / "registry")
    started = time.monotonic()
    with pytest.raises(RegistryError) as failed:
        registry.start(timeout=60, distribution=distribution)
    assert time.monotonic() - started < 30  # told when the JVM exits, not at the timeout
    assert "exited with" in str(failed.value)
    assert str(registry.log_file) in str(failed.value)
    assert "jarfile" in str(failed.value)  # the log's tail says why
    assert processes.find_pids(registry.marker) == []
