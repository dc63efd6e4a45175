"""The one table of client settings: every key reaches all three clients or is refused."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from dgm.clients.oidc import OidcClientCredentials, TokenError, TokenSource
from dgm.clients.settings import (
    JAVA,
    KAFKA_PYTHON,
    TABLE,
    java_settings,
    kafka_python_settings,
    refusals,
)

CERTIFICATE = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"


def scram(tmp_path: Path) -> dict[str, str]:
    """Every passed-on key that goes with SCRAM over TLS with a client certificate."""
    (tmp_path / "a.pem").write_text(CERTIFICATE)
    (tmp_path / "a.key").write_text(KEY)
    return {
        "client.id": "dgm-a",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "dgm",
        "sasl.password": "secret-a",
        "ssl.ca.location": "/etc/ca-a.pem",
        "ssl.endpoint.identification.algorithm": "https",
        "ssl.certificate.location": str(tmp_path / "a.pem"),
        "ssl.key.location": str(tmp_path / "a.key"),
        "ssl.key.password": "key-secret-a",
        "reconnect.backoff.ms": "100",
        "reconnect.backoff.max.ms": "1000",
        "metadata.max.age.ms": "60000",
        "connections.max.idle.ms": "30000",
    }


OIDC = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.method": "oidc",
    "sasl.oauthbearer.client.id": "dgm-client",
    "sasl.oauthbearer.client.secret": "oidc-secret",
    "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
    "sasl.oauthbearer.scope": "kafka",
    "sasl.oauthbearer.extensions": "tenant=a",
}


# librdkafka's other spelling of sasl.mechanism.
PLAIN = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanisms": "PLAIN",
    "sasl.username": "dgm",
    "sasl.password": "secret",
}


def other_value(key: str, value: str, tmp_path: Path) -> str | None:
    """Another valid value for `key`: changing it must change what both clients get. None for
    the OIDC method and mechanism, whose one valid value cannot change."""
    if key == "sasl.oauthbearer.method" or value == "OAUTHBEARER":
        return None
    changes = {
        "security.protocol": "SASL_SSL" if value == "SASL_PLAINTEXT" else "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.mechanisms": "SCRAM-SHA-256",
        "ssl.endpoint.identification.algorithm": "none",
        "sasl.oauthbearer.extensions": "tenant=b",
    }
    if key in ("ssl.certificate.location", "ssl.key.location"):
        changed = tmp_path / f"b{Path(value).suffix}"
        changed.write_text(Path(value).read_text().replace("MII", "MIIX"))
        return str(changed)
    if key.endswith(".ms"):
        return str(int(value) + 1)
    return changes.get(key, value + "-b")


def test_every_row_passes_the_key_to_both_other_clients_or_refuses_it() -> None:
    for row in TABLE:
        if row.refused:
            assert KAFKA_PYTHON in row.refused or JAVA in row.refused, row
            assert not row.kafka_python and not row.java, row
        else:
            assert row.kafka_python and row.java, row


def test_every_passed_key_changes_what_kafka_python_and_java_get(tmp_path: Path) -> None:
    contexts = [scram(tmp_path), OIDC, PLAIN]
    covered = {key for context in contexts for key in context}
    assert covered == {row.key for row in TABLE if not row.refused}
    for context in contexts:
        assert list(refusals(context)) == []
        python, java = kafka_python_settings(context), java_settings(context)
        for key, value in context.items():
            changed = other_value(key, value, tmp_path)
            if changed is None:
                without = {k: v for k, v in context.items() if k != key}
                assert list(refusals(without)), key  # it cannot be left out either
                continue
            other = {**context, key: changed}
            assert list(refusals(other)) == []
            assert kafka_python_settings(other) != python, f"{key} does not reach kafka-python"
            assert java_settings(other) != java, f"{key} does not reach {JAVA}"


def test_refused_rows_are_refused_when_set(tmp_path: Path) -> None:
    for row in (r for r in TABLE if r.refused):
        found = dict(refusals({**scram(tmp_path), row.key: "x"}))
        assert found[row.key] == row.refused


def test_an_unknown_key_is_refused_naming_the_clients() -> None:
    found = dict(refusals({"linger.ms": "5"}))
    assert KAFKA_PYTHON in found["linger.ms"] and JAVA in found["linger.ms"]


def test_scram_and_tls_translate_as_each_client_names_them(tmp_path: Path) -> None:
    settings = scram(tmp_path)
    python = kafka_python_settings(settings)
    assert python["sasl_plain_password"] == "secret-a"
    assert python["ssl_cafile"] == "/etc/ca-a.pem"
    assert python["ssl_check_hostname"] is True
    assert python["reconnect_backoff_ms"] == 100
    java = java_settings(settings)
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="dgm" password="secret-a";'
    )
    assert java["ssl.truststore.type"] == "PEM"
    assert java["ssl.keystore.type"] == "PEM"
    assert java["ssl.keystore.certificate.chain"] == CERTIFICATE
    assert java["ssl.keystore.key"] == KEY
    assert java["ssl.endpoint.identification.algorithm"] == "https"


def test_oidc_translates_to_a_login_handler_and_a_token_provider() -> None:
    java = java_settings(OIDC)
    assert java["sasl.login.callback.handler.class"].endswith(
        "oauthbearer.OAuthBearerLoginCallbackHandler"
    )
    assert java["sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="dgm-client" clientSecret="oidc-secret" scope="kafka" extension_tenant="a";'
    )
    provider = kafka_python_settings(OIDC)["sasl_oauth_token_provider"]
    assert provider == OidcClientCredentials(
        "https://idp/token", "dgm-client", "oidc-secret", "kafka", {"tenant": "a"}
    )
    assert "oidc-secret" not in repr(provider)


def test_a_pkcs1_key_is_refused_for_java(tmp_path: Path) -> None:
    settings = scram(tmp_path)
    Path(settings["ssl.key.location"]).write_text("-----BEGIN RSA PRIVATE KEY-----\nx\n")
    with pytest.raises(ValueError, match="PKCS#8"):
        java_settings(settings)


# --- the OIDC token source kafka-python uses ------------------------------------------------


class _TokenEndpoint(BaseHTTPRequestHandler):
    calls: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        basic = base64.b64decode(self.headers["Authorization"].removeprefix("Basic ")).decode()
        self.calls.append({"body": body, "basic": basic})
        ok = basic == "dgm-client:oidc-secret"
        answer = {"access_token": f"token-{len(self.calls)}", "expires_in": 3600}
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(answer if ok else {"error": "invalid_client"}).encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def token_endpoint() -> Iterator[str]:
    _TokenEndpoint.calls = []
    server = HTTPServer(("127.0.0.1", 0), _TokenEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/token"
    finally:
        server.shutdown()
        thread.join()


def test_the_token_source_asks_once_and_keeps_the_token(token_endpoint: str) -> None:
    source = TokenSource(
        OidcClientCredentials(token_endpoint, "dgm-client", "oidc-secret", "kafka")
    )
    assert source.token() == "token-1"
    assert source.token() == "token-1"  # kept until 80% of an hour has passed
    assert _TokenEndpoint.calls == [
        {"body": "grant_type=client_credentials&scope=kafka", "basic": "dgm-client:oidc-secret"}
    ]


def test_a_refused_client_is_an_error_without_the_secret(token_endpoint: str) -> None:
    source = TokenSource(OidcClientCredentials(token_endpoint, "dgm-client", "wrong-secret"))
    with pytest.raises(TokenError, match="answered HTTP 401 for client dgm-client") as error:
        source.token()
    assert "wrong-secret" not in str(error.value)


def test_the_configuration_page_shows_every_row() -> None:
    page = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    section = page.split("### Client settings: one table for three clients", 1)[1]
    section = section.split("\n### ", 1)[0]
    for row in TABLE:
        shown = f"`{row.key}`" in section or (
            row.key.startswith("sasl.kerberos.") and "`sasl.kerberos.*`" in section
        )
        assert shown, f"docs/configuration.md does not show {row.key}"
