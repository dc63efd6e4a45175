"""The local webhook receiver `dgm demo` runs: JSON bodies kept in the alert store (never the
headers, which may carry a token), anything else refused, loopback only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from alerts.receiver import WebhookReceiver
from dgm.alerting.store import AlertStore


def post(url: str, data: bytes, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_json_bodies_are_kept_without_their_headers(tmp_path: Path) -> None:
    store = AlertStore(tmp_path)
    with WebhookReceiver(store) as receiver:
        assert receiver.url.startswith("http://127.0.0.1:") and receiver.url.endswith("/alerts")
        secret = {"Authorization": "Bearer hunter2", "Content-Type": "application/json"}
        assert post(receiver.url, json.dumps({"rule": "r", "n": 1}).encode(), secret) == 200
        assert post(receiver.url, b"[2]") == 200
        assert post(receiver.url, b"not json") == 400
        assert post(receiver.url, b"") == 400
        with urllib.request.urlopen(receiver.url, timeout=10) as answer:
            assert b"webhook receiver" in answer.read()
    assert [r.body for r in store.received()] == [[2], {"rule": "r", "n": 1}]
    files = list(tmp_path.glob("alerts.sqlite*"))  # the database and its write-ahead log
    assert files and not any(b"hunter2" in f.read_bytes() for f in files)
    assert any(b'"rule"' in f.read_bytes() for f in files)  # what is kept is in them


def test_a_stopped_receiver_frees_its_port(tmp_path: Path) -> None:
    receiver = WebhookReceiver(AlertStore(tmp_path)).start()
    url = receiver.url
    receiver.stop()
    with pytest.raises(urllib.error.URLError):
        post(url, b"{}")
