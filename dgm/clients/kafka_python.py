"""kafka-python client arguments from dgm's librdkafka settings, and secrets kept out of the
messages its clients raise. The collectors' admin requests and the audit's transaction-marker
walk (spark_jobs/audit/aborted_batches.py) both speak kafka-python with these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka.net.sasl.oauth import AbstractTokenProvider

from dgm.clients.oidc import OidcClientCredentials, TokenSource
from dgm.clients.settings import BY_KEY, TOKEN_PROVIDER, kafka_python_settings
from dgm.config.cluster import is_secret_key


def scrub(text: str, settings: Mapping[str, Any]) -> str:
    """`text` with the value of every secret setting replaced by '***'."""
    for key, value in settings.items():
        if is_secret_key(key) and isinstance(value, str) and value:
            text = text.replace(value, "***")
    return text


def kafka_python_config(
    settings: Mapping[str, Any], request_timeout_s: float, client_id: str = "dgm-collectors"
) -> dict[str, Any]:
    """kafka-python KafkaAdminClient settings equivalent to the librdkafka `settings`, by
    dgm.clients.settings' table (the config load refused what it cannot translate)."""
    client = {k: str(v) for k, v in settings.items() if k in BY_KEY}
    config: dict[str, Any] = {
        "bootstrap_servers": settings["bootstrap.servers"],
        "request_timeout_ms": int(request_timeout_s * 1000),
        "bootstrap_timeout_ms": int(request_timeout_s * 1000),
        "client_id": client_id,
        **kafka_python_settings(client),
    }
    credentials = config.get(TOKEN_PROVIDER)
    if isinstance(credentials, OidcClientCredentials):
        config[TOKEN_PROVIDER] = OidcTokenProvider(TokenSource(credentials, request_timeout_s))
    return config


class OidcTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """kafka-python's OAUTHBEARER token provider: tokens from the OIDC token endpoint, kept
    until they near expiry (dgm.clients.oidc), with the configured SASL extensions."""

    def __init__(self, source: TokenSource) -> None:
        super().__init__()
        self.source = source

    def token(self) -> str:
        return self.source.token()

    def extensions(self) -> dict[str, str]:
        return dict(self.source.credentials.extensions)
