"""A real OAuth 2 token endpoint on loopback, for OAUTHBEARER against the embedded broker.

It answers the client credentials grant (client id and secret in HTTP Basic authentication)
with a JWT signed HS256 (the broker checks it against the JWKS file written here: the same
key), whose `sub` is the client id, so the broker's principal is User:<client id>, and whose
`aud` and `iss` are those the broker expects (embedded_kafka.security). Python's
standard library signs it: no JOSE package is needed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from embedded_kafka.security import TOKEN_AUDIENCE, TOKEN_ISSUER

KEY_ID = "dgm-test"
LIFETIME_S = 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


@dataclass
class Issuer:
    url: str  # the token endpoint
    jwks_file: Path
    clients: dict[str, str] = field(default_factory=dict)  # client id -> secret
    issued: list[str] = field(default_factory=list)  # the client id of each token issued


def sign(key: bytes, claims: dict[str, Any]) -> str:
    header = {"alg": "HS256", "typ": "JWT", "kid": KEY_ID}
    signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    signature = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(signature)}"


def write_jwks(path: Path, key: bytes) -> None:
    jwk = {"kty": "oct", "kid": KEY_ID, "alg": "HS256", "use": "sig", "k": _b64(key)}
    path.write_text(json.dumps({"keys": [jwk]}))


@contextmanager
def running_issuer(folder: Path) -> Iterator[Issuer]:
    key = secrets.token_bytes(32)
    jwks = folder / "jwks.json"
    write_jwks(jwks, key)
    issuer = Issuer("", jwks)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode())
            basic = self.headers.get("Authorization", "").removeprefix("Basic ")
            client, _, secret = base64.b64decode(basic).decode().partition(":")
            if form.get("grant_type") != ["client_credentials"] or not hmac.compare_digest(
                issuer.clients.get(client, secrets.token_hex(8)), secret
            ):
                self._answer(401, {"error": "invalid_client"})
                return
            now = int(time.time())
            claims = {
                "sub": client, "aud": TOKEN_AUDIENCE, "iss": TOKEN_ISSUER,
                "iat": now, "exp": now + LIFETIME_S,
            }  # fmt: skip
            if form.get("scope"):
                claims["scope"] = form["scope"][0]
            issuer.issued.append(client)
            answer = {
                "access_token": sign(key, claims),
                "token_type": "Bearer",
                "expires_in": LIFETIME_S,
            }
            self._answer(200, answer)

        def _answer(self, status: int, document: dict[str, Any]) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    issuer.url = f"http://127.0.0.1:{server.server_port}/token"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        thread.join()
