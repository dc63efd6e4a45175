"""[cluster] and [clusters.<name>]: where a cluster is and the client settings that reach it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dgm.clients.settings import JAVA as JAVA_CLIENT_NAME
from dgm.clients.settings import (
    java_client_refusals,
    java_settings,
    kafka_python_settings,
    refusals,
)
from dgm.config.problems import ConfigError, Problem
from dgm.config.schema_registry import SchemaRegistryConfig

# Client settings whose values are credentials. Matched on the lower-cased key.
_SECRET_WORDS = ("password", "secret", "jaas", "token")
_SECRET_SUFFIXES = (".key", "key.pem", "keystore.key")


def is_secret_key(key: str) -> bool:
    """True for a client setting whose value must never be printed (e.g. sasl.password)."""
    key = key.lower()
    return any(word in key for word in _SECRET_WORDS) or key.endswith(_SECRET_SUFFIXES)


def redacted(settings: Mapping[str, str]) -> dict[str, str]:
    """A copy of client settings that is safe to log: secret values replaced by '***'."""
    return {key: "***" if is_secret_key(key) else value for key, value in settings.items()}


@dataclass(frozen=True, repr=False)  # repr below redacts credentials
class ClusterConfig:
    """How to reach the Kafka cluster, for the Python clients and for Spark."""

    # None: use the embedded broker started by `dgm broker start`.
    bootstrap_servers: str | None = None
    # librdkafka settings (security.protocol, sasl.*, ssl.*), for all three clients: passed
    # to confluent-kafka as written, translated for kafka-python and Spark's Java client by
    # dgm.clients.settings' one table; a key one of them cannot take is refused.
    client: dict[str, str] = field(default_factory=dict)
    # Spark's fetch tuning only (dgm.clients.settings.JAVA_FETCH_TUNING: fetch.max.wait.ms,
    # max.partition.fetch.bytes, ...), Java names without Spark's "kafka." prefix: Spark's
    # consumer is the one client that fetches records.
    java_client: dict[str, str] = field(default_factory=dict)
    # [cluster.schema_registry]: the registry of this cluster's framed records (Avro,
    # Protobuf, JSON Schema); None: records are read without one.
    schema_registry: SchemaRegistryConfig | None = None

    def librdkafka_config(self, bootstrap_servers: str) -> dict[str, str]:
        """Settings for confluent-kafka clients; the caller decides the bootstrap servers."""
        return {"bootstrap.servers": bootstrap_servers, **self.client}

    def kafka_python_config(self, bootstrap_servers: str) -> dict[str, Any]:
        """KafkaAdminClient arguments, translated from `client` (an OIDC token provider comes
        as dgm.clients.oidc.OidcClientCredentials, for the caller to wrap)."""
        return {"bootstrap_servers": bootstrap_servers, **kafka_python_settings(self.client)}

    def spark_client(self) -> dict[str, str]:
        """Java client settings for Spark: `client` translated, then the fetch tuning.
        ConfigError when a client certificate's files cannot be read or converted."""
        try:
            return {**java_settings(self.client), **self.java_client}
        except (OSError, ValueError) as error:
            raise ConfigError(f"cluster.client: for {JAVA_CLIENT_NAME}: {error}") from None

    def problems(self) -> Iterator[Problem]:
        if self.bootstrap_servers is not None and not self.bootstrap_servers.strip():
            yield "bootstrap_servers", "expected host:port[,host:port...], got ''"
        # One source of truth for the address: a second one in the pass-through would win
        # silently in one client and not in the other.
        for table, settings in (("client", self.client), ("java_client", self.java_client)):
            for key in settings:
                if key in ("bootstrap.servers", "kafka.bootstrap.servers"):
                    yield f"{table}.{key}", "set cluster.bootstrap_servers instead"
        client = {k: v for k, v in self.client.items() if k != "bootstrap.servers"}
        for key, why in refusals(client):
            yield f"client.{key}", why
        tuning = {k: v for k, v in self.java_client.items() if "bootstrap.servers" not in k}
        for key, why in java_client_refusals(tuning):
            yield f"java_client.{key}", why

    def __repr__(self) -> str:
        return (
            f"ClusterConfig(bootstrap_servers={self.bootstrap_servers!r}, "
            f"client={redacted(self.client)!r}, java_client={redacted(self.java_client)!r}, "
            f"schema_registry={self.schema_registry!r})"
        )
