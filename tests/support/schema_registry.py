"""A real schema registry for the tests: dgm's embedded Apicurio Registry, or an external one.

`DGM_SCHEMA_REGISTRY_URL` names an external registry's Confluent-compatible API (what
confluent-kafka's `schema.registry.url` takes, e.g. http://host:8080/apis/ccompat/v7), as
DGM_BOOTSTRAP names an external Kafka; otherwise one embedded registry is started for the
session (embedded_registry.server) and stopped at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dgm.config.schema_registry import SchemaRegistryConfig
from embedded_registry.server import EmbeddedRegistry

ENV_URL = "DGM_SCHEMA_REGISTRY_URL"


@dataclass(frozen=True)
class RegistryUnderTest:
    """A registry tests may register schemas in; `embedded` is None for an external one."""

    url: str  # the Confluent-compatible API
    embedded: EmbeddedRegistry | None

    def client_config(self) -> dict[str, Any]:
        """For confluent_kafka.schema_registry.SchemaRegistryClient."""
        return {"url": self.url}

    def dgm_config(self, **settings: Any) -> SchemaRegistryConfig:
        """[cluster.schema_registry] for this registry (`settings` add or replace keys)."""
        return SchemaRegistryConfig(url=self.url, **settings)


def external() -> RegistryUnderTest | None:
    url = os.environ.get(ENV_URL)
    return RegistryUnderTest(url.rstrip("/"), None) if url else None


def embedded(folder: Path) -> Iterator[RegistryUnderTest]:
    """One embedded registry, started in `folder` and stopped when the generator closes."""
    registry = EmbeddedRegistry(folder)
    registry.start(progress=print)
    try:
        yield RegistryUnderTest(registry.ccompat_url, registry)
    finally:
        registry.stop()
