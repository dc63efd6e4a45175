"""A local HTTP receiver of webhook posts, standing in for Slack, Alertmanager or any JSON
endpoint the alert rules notify."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any


class Receiver:
    """An HTTP server on 127.0.0.1 in a thread, keeping every JSON body POSTed to it and the
    headers it came with; it answers `status` (200 unless a test changes it)."""

    def __init__(self, port: int = 0) -> None:
        self.bodies: list[Any] = []
        self.headers: list[dict[str, str]] = []
        self.status = 200
        bodies, headers, receiver = self.bodies, self.headers, self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                headers.append(dict(self.headers.items()))
                bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook?token=secret"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
