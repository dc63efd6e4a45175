"""Ports: finding free ones on loopback, refusing a taken one early."""

from __future__ import annotations

import errno
import socket

from dgm.errors import UserFacingError


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
