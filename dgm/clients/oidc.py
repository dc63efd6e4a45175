"""OAuth 2 client credentials (OIDC) for the one client that has no token fetching of its own.

librdkafka (`sasl.oauthbearer.method = oidc`) and Kafka's Java client
(OAuthBearerLoginCallbackHandler) fetch and refresh tokens themselves; kafka-python only asks a
token provider object for one. `TokenSource` is that fetch, done the way the other two do it:
a POST of `grant_type=client_credentials` (and the scope) to the token endpoint, the client id
and secret in HTTP Basic authentication as they are written (both librdkafka and the Java
client send them so, not form-encoded), the `access_token` of the JSON
answer kept until 80% of its `expires_in` has passed. The secret and the token are never put
in a message, a log line or a repr.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

# Refresh once this share of a token's lifetime has passed, as librdkafka and Java do.
REFRESH_AT = 0.8
DEFAULT_LIFETIME_S = 300.0  # an answer without expires_in


class TokenError(Exception):
    """The token endpoint did not give a token; the message names the endpoint, not secrets."""


@dataclass(frozen=True)
class OidcClientCredentials:
    token_endpoint_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


class TokenSource:
    """Tokens for `credentials`, fetched on first use and again before they expire."""

    def __init__(self, credentials: OidcClientCredentials, timeout_s: float = 10.0) -> None:
        self.credentials = credentials
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.monotonic() >= self._refresh_at:
                self._token, lifetime = self._fetch()
                self._refresh_at = time.monotonic() + REFRESH_AT * lifetime
            return self._token

    def _fetch(self) -> tuple[str, float]:
        c = self.credentials
        body = {"grant_type": "client_credentials", **({"scope": c.scope} if c.scope else {})}
        basic = base64.b64encode(f"{c.client_id}:{c.client_secret}".encode()).decode()
        request = urllib.request.Request(
            c.token_endpoint_url,
            data=urllib.parse.urlencode(body).encode(),
            headers={
                "Authorization": f"Basic {basic}",
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        where = f"token endpoint {c.token_endpoint_url}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                document = json.loads(answer.read())
        except urllib.error.HTTPError as error:
            raise TokenError(
                f"{where} answered HTTP {error.code} for client {c.client_id}"
            ) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise TokenError(f"{where} did not answer: {reason}") from None
        except ValueError:
            raise TokenError(f"{where} answered something other than JSON") from None
        token = document.get("access_token") if isinstance(document, dict) else None
        if not isinstance(token, str) or not token:
            raise TokenError(f"{where} answered without an access_token")
        lifetime = document.get("expires_in", DEFAULT_LIFETIME_S)
        seconds = float(lifetime) if isinstance(lifetime, int | float) else DEFAULT_LIFETIME_S
        return token, max(seconds, 1.0)
