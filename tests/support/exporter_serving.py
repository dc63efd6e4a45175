"""Helpers for the exporter tests: an in-process server, scraping and JSON over HTTP."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from exporter.server import ExporterServer
from exporter.snapshot import DEFAULT_SETTINGS, ScrapeSettings

# family name -> {labels as a sorted tuple of (name, value): value}
Scrape = dict[str, dict[tuple[tuple[str, str], ...], float]]


@contextmanager
def serving(state_dir: Path, settings: ScrapeSettings = DEFAULT_SETTINGS) -> Iterator[str]:
    """The exporter over `state_dir` on a free loopback port; yields its base URL."""
    server = ExporterServer(("127.0.0.1", 0), state_dir, settings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def get(url: str) -> tuple[int, str, bytes]:
    """(status, content type, body), error statuses included."""
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.headers["Content-Type"], answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


def get_json(url: str) -> tuple[int, Any]:
    status, content_type, body = get(url)
    assert content_type == "application/json", (url, content_type)
    return status, json.loads(body)


def scrape(base: str) -> Scrape:
    status, content_type, body = get(f"{base}/metrics")
    assert status == 200, body
    assert content_type.startswith("text/plain"), content_type
    found: Scrape = {}
    for family in text_string_to_metric_families(body.decode()):
        assert family.type == "gauge", family
        series = found.setdefault(family.name, {})
        for sample in family.samples:
            assert sample.name == family.name
            series[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def by(scraped: Scrape, family: str, label: str) -> dict[str, float]:
    """One family's values keyed by one label (the family has no other varying label)."""
    return {dict(labels)[label]: value for labels, value in scraped.get(family, {}).items()}


def single(scraped: Scrape, family: str) -> float:
    ((labels, value),) = scraped[family].items()
    assert labels == ()
    return value
