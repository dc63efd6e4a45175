"""Client settings for producing through the lab's fault proxy (lab/proxy.py)."""

from __future__ import annotations

# Fast retries: a closed connection is retried at once; reconnects do not back off for long.
FAST_RETRIES = {
    "request.timeout.ms": "3000",
    "socket.timeout.ms": "3000",
    "retry.backoff.ms": "20",
    "retry.backoff.max.ms": "200",
    "reconnect.backoff.ms": "10",
    "reconnect.backoff.max.ms": "200",
    "message.timeout.ms": "60000",
    "linger.ms": "1",
}
