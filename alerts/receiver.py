"""A local webhook receiver: an HTTP server on 127.0.0.1 that keeps every JSON body POSTed to
it in the alert store (`received`), where the dashboard's Alerts page shows it.

`dgm demo` runs one and points `[alerts_webhook] url` at it, so the demo's alert rules
deliver somewhere real and a user sees what a receiver (Slack, Alertmanager, a pager) would
get. It answers 200 to a JSON body, 400 to anything else, and GET says what it is.
"""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dgm.alerting.store import AlertStore

log = logging.getLogger("dgm.alerts")

PATH = "/alerts"
MAX_BODY = 1_000_000  # bytes: a notification is a few hundred


class WebhookReceiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, store: AlertStore, host: str = "127.0.0.1", port: int = 0) -> None:
        self.store = store
        super().__init__((host, port), _Handler)
        self._thread = threading.Thread(target=self.serve_forever, name="webhook-receiver")
        self._thread.daemon = True

    @property
    def url(self) -> str:
        """What `[alerts_webhook] url` names."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}{PATH}"

    def start(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self.shutdown()
            self._thread.join(10)
        self.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    server: WebhookReceiver
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            self._answer(400, f"expected a JSON body of 1 to {MAX_BODY} bytes")
            return
        try:
            body: Any = json.loads(self.rfile.read(length))
        except ValueError as error:
            self._answer(400, f"expected a JSON body: {error}")
            return
        self.server.store.receive(body)  # headers are not kept: they may carry a token
        self._answer(200, "received")

    def do_GET(self) -> None:
        self._answer(
            200, f"dgm webhook receiver: POST JSON to {PATH}; the Alerts page shows what it got"
        )

    def _answer(self, status: int, text: str) -> None:
        body = f"{text}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("webhook receiver: %s %s", self.address_string(), format % args)
