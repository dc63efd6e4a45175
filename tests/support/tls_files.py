"""A throw-away certificate authority for TLS tests: a CA, a server certificate for loopback
(127.0.0.1, localhost) and a client certificate, made with the openssl command line."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    server_certificate: Path
    server_key: Path
    client_certificate: Path
    client_key: Path


def make(folder: Path) -> TlsFiles:
    folder.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(*(folder / name for name in ("ca.pem", "server.pem", "server.key",
                                                   "client.pem", "client.key")))  # fmt: skip
    ca_key = folder / "ca.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             "/CN=dgm test CA", "-keyout", ca_key, "-out", files.ca)  # fmt: skip
    extensions = folder / "server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, certificate, key, extra in (
        ("127.0.0.1", files.server_certificate, files.server_key, ["-extfile", extensions]),
        ("dgm-client", files.client_certificate, files.client_key, []),
    ):
        request = folder / f"{key.stem}.csr"
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                 "-keyout", key, "-out", request)  # fmt: skip
        _openssl("x509", "-req", "-in", request, "-CA", files.ca, "-CAkey", ca_key,
                 "-CAcreateserial", "-days", "2", "-out", certificate, *extra)  # fmt: skip
    return files


def _openssl(*arguments: object) -> None:
    subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True, timeout=60)
