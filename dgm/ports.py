"""Ports: finding free ones on loopback, refusing a taken one early, parsing one."""

from __future__ import annotations

import argparse
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


def port_number(text: str) -> int:
    """A TCP port, 1..65535 (argparse type)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"expected a port in 1..65535, got {port}")
    return port


def add_listen_arguments(parser: argparse.ArgumentParser, default_port: int) -> None:
    """--port and --host of a server command; loopback unless told otherwise."""
    parser.add_argument(
        "--port", type=port_number, default=default_port, help=f"port (default {default_port})"
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; 0.0.0.0 exposes it to the network)",
    )
