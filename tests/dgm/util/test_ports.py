"""Ports chosen now and listened on later must stay ours meanwhile."""

from __future__ import annotations

import socket

from dgm.util.ports import ephemeral_floor, lasting_ports


def test_lasting_ports_are_free_distinct_and_never_handed_out_by_the_kernel() -> None:
    ports = lasting_ports(12)
    assert len(set(ports)) == 12
    assert all(port < ephemeral_floor() for port in ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
