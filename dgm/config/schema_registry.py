"""[cluster.schema_registry] and [clusters.<name>.schema_registry]: the registry that holds the
schemas of a cluster's framed records (Avro, Protobuf, JSON Schema), and how to reach it.

The credentials (`password`, `bearer_token`, `key_password`) are secrets like every client
secret (dgm.config.cluster.is_secret_key): the loader never echoes them, `repr` redacts them,
and the fetcher (dgm.clients.schema_registry) never logs them or puts them in an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from dgm.config.problems import Problem

# An Apicurio Registry's Confluent-compatible API lives at <root>/apis/ccompat/v<N>; its own
# API (which serves schemas by globalId) at <root>/apis/registry/v3.
_CCOMPAT_PATH = re.compile(r"/apis/ccompat/v\d+/*$")
APICURIO_API_PATH = "/apis/registry/v3"


@dataclass(frozen=True, repr=False)  # repr below redacts credentials
class SchemaRegistryConfig:
    """Where a cluster's schema registry is and how dgm authenticates to it."""

    # The Confluent-compatible API's base URL, as confluent-kafka's `schema.registry.url`
    # takes it: http(s)://host:8081 for Confluent's, http(s)://host/apis/ccompat/v7 for
    # Apicurio's. Schemas by the 4-byte id of Confluent's framing are fetched here.
    url: str
    # Apicurio's own API (http(s)://host/apis/registry/v3), for records framed with its 8-byte
    # globalId; unset, it is derived from `url` when that ends with /apis/ccompat/v<N>.
    apicurio_url: str | None = None
    # HTTP Basic authentication (both or neither), or a bearer token; not both.
    username: str | None = None
    password: str | None = None
    bearer_token: str | None = None
    # TLS: a PEM CA bundle (unset: the system's), a client certificate and key (PEM), the
    # key's password, and whether the server's certificate and host name are checked. The
    # files are read when the fetcher is made, like the Kafka clients' (not at load time: a
    # config may be checked on a machine without them).
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: str | None = None
    verify: bool = True
    # One request's timeout, and how many times a transient failure (unreachable, 5xx, 429)
    # is retried, with a doubling backoff, before the lookup fails.
    timeout_s: float = 10.0
    retries: int = 3

    def api_url(self) -> str | None:
        """Apicurio's own API, for lookups by globalId; None when it cannot be known."""
        if self.apicurio_url:
            return self.apicurio_url.rstrip("/")
        match = _CCOMPAT_PATH.search(self.url)
        if match is None:
            return None
        return self.url[: match.start()] + APICURIO_API_PATH

    def problems(self) -> Iterator[Problem]:
        for key in ("url", "apicurio_url"):
            value = getattr(self, key)
            if value is not None:
                yield from _url_problems(key, value)
        if (self.username is None) != (self.password is None):
            missing = "password" if self.password is None else "username"
            yield missing, "missing: basic authentication needs both username and password"
        if self.bearer_token is not None and self.username is not None:
            yield "bearer_token", "set either username/password or bearer_token, not both"
        if self.bearer_token is not None and not self.bearer_token.strip():
            yield "bearer_token", "expected a token, got an empty string"
        if (self.cert_file is None) != (self.key_file is None):
            missing = "key_file" if self.key_file is None else "cert_file"
            yield missing, "missing: a client certificate needs both cert_file and key_file"
        if self.key_password is not None and self.key_file is None:
            yield "key_password", "set only with key_file"
        if not self.timeout_s > 0:
            yield "timeout_s", f"expected a number of seconds > 0, got {self.timeout_s}"
        if self.retries < 0:
            yield "retries", f"expected 0 or more, got {self.retries}"

    def __repr__(self) -> str:
        def hidden(value: str | None) -> str | None:
            return None if value is None else "***"

        return (
            f"SchemaRegistryConfig(url={self.url!r}, apicurio_url={self.apicurio_url!r}, "
            f"username={self.username!r}, password={hidden(self.password)!r}, "
            f"bearer_token={hidden(self.bearer_token)!r}, ca_file={self.ca_file!r}, "
            f"cert_file={self.cert_file!r}, key_file={self.key_file!r}, "
            f"key_password={hidden(self.key_password)!r}, verify={self.verify!r}, "
            f"timeout_s={self.timeout_s!r}, retries={self.retries!r})"
        )


def _url_problems(key: str, url: str) -> Iterator[Problem]:
    # The URL is printed in errors and logs: credentials in it would leak, so they are refused
    # (and the value itself is never echoed, in case it holds some).
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        yield key, "expected an http:// or https:// URL"
        return
    if parts.scheme not in ("http", "https") or not parts.hostname:
        yield key, "expected an http:// or https:// URL with a host"
    elif parts.username is not None or parts.password is not None:
        yield key, "credentials in the URL are refused: set username and password instead"
    elif parts.query or parts.fragment:
        yield key, "expected a URL without a query or fragment"
