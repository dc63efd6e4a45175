"""Ports: finding free ones on loopback, refusing a taken one early."""

from __future__ import annotations

import errno
import random
import socket
from pathlib import Path

from dgm.util.errors import UserFacingError


def free_ports(count: int) -> list[int]:
    """Ports free on loopback now; held open together so the kernel hands out distinct ones."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LASTING_FLOOR = 10000  # below it sit well-known services' ports


def ephemeral_floor() -> int:
    """The lowest port the kernel hands out on its own (Linux's default range starts at 32768)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def lasting_ports(count: int) -> list[int]:
    """Ports free on loopback now that the kernel will never hand to another socket on its own.

    For a port that must stay ours while nothing listens on it: a broker's port across its
    restarts, a fault listener's advertised port until its proxy starts. A port from the
    ephemeral range can meanwhile become the source port of any outgoing connection (seen in CI:
    a proxy that could not listen on its advertised port an hour after it was chosen).
    """
    floor = ephemeral_floor()
    if floor - _LASTING_FLOOR < count * 4:
        return free_ports(count)  # a machine with no room below its ephemeral range
    chosen: list[int] = []
    candidates = random.sample(range(_LASTING_FLOOR, floor), k=min(floor - _LASTING_FLOOR, 2000))
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        chosen.append(port)
        if len(chosen) == count:
            return chosen
    raise OSError(f"no {count} free ports on loopback between {_LASTING_FLOOR} and {floor}")


def check_port_free(host: str, port: int) -> None:
    """A clear error now rather than a server that restarts forever."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise UserFacingError(
                    f"port {port} on {host} is taken: stop what uses it, or pass --port"
                ) from None
            raise UserFacingError(f"cannot listen on {host}:{port}: {error.strerror}") from None
