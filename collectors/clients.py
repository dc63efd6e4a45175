"""The admin clients the samplers use, and what counts as "the cluster did not answer".

confluent-kafka does almost everything; kafka-python speaks DescribeProducers,
ListTransactions and DescribeTransactions, which confluent-kafka lacks, and the
coordinator-bound group requests (collectors/group_requests.py says why). Both get the same
settings from [cluster] client: librdkafka names, translated for kafka-python by the one table
of dgm.clients.settings. Client errors reach the user as one line, with any secret value
scrubbed out.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from dgm.clients.kafka_python import kafka_python_config, scrub
from dgm.config.problems import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")

_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:,\[\]]+):(\d{1,5})")
_RDKAFKA_SUFFIX = re.compile(r"\s*\(after \d+ms in state \w+\)\s*$")


class ClusterUnreachable(Exception):
    """The cluster (or the part a sampler needs) did not answer in time; an outage."""


def check_bootstrap(servers: str) -> None:
    """ConfigError unless `servers` is host:port[,host:port...]."""
    for entry in servers.split(","):
        match = _HOST_PORT.fullmatch(entry.strip())
        if not match or not 0 < int(match[2]) < 65536:
            raise ConfigError(
                f"bootstrap servers: expected host:port[,host:port...], got {entry.strip()!r} "
                f"in {servers!r}"
            )


class Clients:
    """One confluent AdminClient for the life of the collector; kafka-python admin clients
    made on first use and remade after a failure (they do not recover by themselves): one
    for the cycle's requests, one for the share-group requests, which run beside the cycle
    (collectors/share_sampler.py) and so need a client of their own."""

    def __init__(self, settings: Mapping[str, Any], request_timeout_s: float) -> None:
        self.settings = dict(settings)
        self.request_timeout_s = request_timeout_s
        self.errors: list[KafkaError] = []
        librdkafka_log = logging.getLogger("collectors.librdkafka")
        # librdkafka repeats a connection failure every few ms: keep it out of the output
        # unless asked for (-v); the runner reports an outage once, with the last error.
        librdkafka_log.propagate = logging.getLogger().isEnabledFor(logging.DEBUG)
        if not librdkafka_log.handlers:
            # Without a handler of its own, Python's last-resort handler would print it anyway.
            librdkafka_log.addHandler(logging.NullHandler())
        try:
            config: dict[str, Any] = {
                **self.settings,
                "client.id": self.settings.get("client.id", "dgm-collectors"),
                "logger": librdkafka_log,
                "error_cb": self.errors.append,
            }
            self.admin = AdminClient(config)
        except KafkaException as error:
            raise ConfigError(
                f"[cluster] client settings: {scrub(error.args[0].str(), self.settings)}"
            ) from None
        self._python_admin: KafkaAdminClient | None = None
        self._share_admin: KafkaAdminClient | None = None
        self._last_error: str | None = None
        self._authentication_failed = False

    @property
    def bootstrap_servers(self) -> str:
        return str(self.settings["bootstrap.servers"])

    def last_error(self) -> str | None:
        """librdkafka's latest complaint (e.g. a failed SASL handshake), scrubbed."""
        self._serve_errors()
        return self._last_error

    def authentication_failed(self) -> bool:
        """Whether librdkafka reported a failed SASL/SSL authentication since the start."""
        self._serve_errors()
        return self._authentication_failed

    def _serve_errors(self) -> None:
        self.admin.poll(0)  # runs error_cb for what librdkafka queued
        if self.errors:
            latest = self.errors[-1]
            self._last_error = scrub(_RDKAFKA_SUFFIX.sub("", latest.str()), self.settings)
            self._authentication_failed |= any(
                e.code() == KafkaError._AUTHENTICATION for e in self.errors
            )
            del self.errors[:]

    def python_admin(self) -> KafkaAdminClient:
        if self._python_admin is None:
            self._python_admin = self._kafka_python_admin()
        return self._python_admin

    def share_admin(self) -> KafkaAdminClient:
        """The share-group requests' own client: used by one thread at a time, not the cycle's."""
        if self._share_admin is None:
            self._share_admin = self._kafka_python_admin()
        return self._share_admin

    def _kafka_python_admin(self) -> KafkaAdminClient:
        config = kafka_python_config(self.settings, self.request_timeout_s)
        try:
            return KafkaAdminClient(**config)
        except Exception as error:  # kafka-python raises many kinds; all mean "no answer"
            raise ClusterUnreachable(
                f"kafka-python admin client: {scrub(str(error), self.settings)}"
            ) from None

    def using_python_admin(self, what: str, call: Callable[[], T]) -> T:
        """call()'s result; a kafka-python failure in it (connection, timeout, a coordinator
        loading) resets that client, which does not recover by itself, and is an outage of
        `what` (ClusterUnreachable), its message scrubbed of secrets."""
        try:
            return call()
        except ClusterUnreachable:
            self.reset_python_admin()
            raise
        except Exception as error:  # kafka-python raises many kinds; all mean "no answer"
            self.reset_python_admin()
            message = scrub(f"{type(error).__name__}: {error}", self.settings)
            raise ClusterUnreachable(f"{what}: {message}") from None

    def reset_python_admin(self) -> None:
        admin, self._python_admin = self._python_admin, None
        _close(admin)

    def reset_share_admin(self) -> None:
        admin, self._share_admin = self._share_admin, None
        _close(admin)

    def close(self) -> None:
        self.reset_python_admin()
        self.reset_share_admin()


def _close(admin: KafkaAdminClient | None) -> None:
    if admin is not None:
        try:
            admin.close()
        except Exception:  # closing a broken client must not hide the original failure
            log.debug("closing a kafka-python admin client failed", exc_info=True)
