"""One HTTP server for `/metrics` (Prometheus text or OpenMetrics), `/api/v1/...` (JSON) and
`/healthz` (the server answers: for health checks, docker-compose.yml's among them).

Threaded (a slow scrape does not hold up the API); each request reads the publication anew.
"""

from __future__ import annotations

import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from dgm import __version__
from exporter import api
from exporter.collector import registry_for
from exporter.snapshot import DEFAULT_SETTINGS, ScrapeSettings

log = logging.getLogger(__name__)
INDEX = (
    b"dgm exporter: /metrics (Prometheus), /api/v1/verdicts, /api/v1/pipelines/{name}, "
    b"/api/v1/topics/{topic}/duplicates, /healthz\n"
)
HEALTH = "/healthz"


class ExporterServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        state_dir: Path,
        settings: ScrapeSettings = DEFAULT_SETTINGS,
    ) -> None:
        self.state_dir = Path(state_dir)
        # analysis.interval_s also says when the API's `stale` is true, as `dgm verdicts` judges
        self.settings = settings
        self.registry: CollectorRegistry = registry_for(self.state_dir, settings)
        super().__init__(address, Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class Handler(BaseHTTPRequestHandler):
    server: ExporterServer
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        try:
            self._get()
        except Exception:  # one bad request must not stop the server; say it in JSON
            log.exception("GET %s failed", self.path)
            body = api.encode({"error": f"internal error answering {self.path} (see the log)"})
            self._send(500, "application/json", body)

    def _get(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._send(200, content_type, encoder(self.server.registry))
        elif url.path.startswith(api.PREFIX):
            status, document = api.answer(
                self.server.state_dir, url.path, url.query, self.server.settings.interval_s
            )
            self._send(status, "application/json", api.encode(document))
        elif url.path == HEALTH:
            # Liveness only: the server takes requests. A missing or stale publication is
            # not the exporter's ill health; /metrics says it (dgm_publication_up, the ages)
            # and Prometheus alerts on it (deploy/prometheus/alerts.yml).
            self._send(
                200, "application/json", api.encode({"status": "ok", "version": __version__})
            )
        elif url.path == "/":
            self._send(200, "text/plain; charset=utf-8", INDEX)
        else:
            body = api.encode({"error": f"no such endpoint: {url.path}"})
            self._send(404, "application/json", body)

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)
