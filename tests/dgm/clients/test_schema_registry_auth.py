"""dgm's schema fetcher against a real registry that serves HTTPS and demands HTTP Basic
credentials: the configured CA, certificate and credentials are used, a refusal is told as
such, and no secret reaches a log or an error."""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from dgm.clients.schema_registry import RegistrySchemas
from dgm.config.schema_registry import SchemaRegistryConfig
from dgm.contracts.registered_schemas import RegisteredSchema, SchemaLookupError
from embedded_registry.server import EmbeddedRegistry
from tests.support import tls_files
from tests.support.tls_files import TlsFiles

# A registry of its own (a JVM), with credentials: not for the tier that starts none.
pytestmark = pytest.mark.schema_registry

USER = "dgm-reader"
PASSWORD = "basic-secret-" + uuid.uuid4().hex
TOKEN = "bearer-secret-" + uuid.uuid4().hex
AVRO = json.dumps({"type": "record", "name": "Ping", "fields": [{"name": "id", "type": "long"}]})


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return tls_files.make(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, tls: TlsFiles) -> Iterator[EmbeddedRegistry]:
    registry = EmbeddedRegistry(
        tmp_path_factory.mktemp("secured"),
        basic_auth=(USER, PASSWORD),
        tls=(tls.server_certificate, tls.server_key),
    )
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="module")
def schema_id(secured: EmbeddedRegistry, tls: TlsFiles) -> int:
    client = SchemaRegistryClient(
        {
            "url": secured.ccompat_url,
            "basic.auth.user.info": f"{USER}:{PASSWORD}",
            "ssl.ca.location": str(tls.ca),
        }
    )
    return client.register_schema(f"pings-{uuid.uuid4().hex[:8]}-value", Schema(AVRO, "AVRO"))


def test_the_configured_ca_and_credentials_are_used(
    secured: EmbeddedRegistry, schema_id: int, tls: TlsFiles
) -> None:
    assert secured.ccompat_url.startswith("https://127.0.0.1:")
    config = SchemaRegistryConfig(
        url=secured.ccompat_url, username=USER, password=PASSWORD, ca_file=tls.ca
    )
    assert RegistrySchemas(config).schema(schema_id) == RegisteredSchema(schema_id, "AVRO", AVRO)
    # A client certificate is offered when configured (this server asks for none).
    with_certificate = dataclasses.replace(
        config, cert_file=tls.client_certificate, key_file=tls.client_key
    )
    assert RegistrySchemas(with_certificate).schema(schema_id).text == AVRO


def test_a_certificate_no_configured_ca_signed_is_refused_unless_unverified(
    secured: EmbeddedRegistry, schema_id: int
) -> None:
    config = SchemaRegistryConfig(url=secured.ccompat_url, username=USER, password=PASSWORD)
    schemas = RegistrySchemas(config, sleep=lambda _: None)
    with pytest.raises(SchemaLookupError) as refused:
        schemas.schema(schema_id)
    assert refused.value.reason == "tls error"
    assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value)
    assert schemas.counts().requests == 1  # not retried: it would be refused again
    unverified = dataclasses.replace(config, verify=False)
    assert RegistrySchemas(unverified).schema(schema_id).text == AVRO


@pytest.mark.parametrize(
    "credentials",
    [{}, {"username": USER, "password": PASSWORD + "x"}, {"bearer_token": TOKEN}],
    ids=["none", "wrong password", "a bearer token"],
)
def test_a_refusal_is_unauthorized_and_no_secret_is_told(
    secured: EmbeddedRegistry,
    schema_id: int,
    tls: TlsFiles,
    credentials: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = SchemaRegistryConfig(url=secured.ccompat_url, ca_file=tls.ca, retries=2, **credentials)
    schemas = RegistrySchemas(config, sleep=lambda _: None)
    with pytest.raises(SchemaLookupError) as refused:
        schemas.schema(schema_id)
    assert refused.value.reason == "unauthorized"
    assert schemas.counts().requests == 1  # a refusal is not retried
    with pytest.raises(SchemaLookupError):  # nor remembered: credentials may be rotated
        schemas.schema(schema_id)
    assert schemas.counts().requests == 2
    for secret in (PASSWORD, TOKEN):
        assert secret not in caplog.text
        assert secret not in str(refused.value)
        assert secret not in repr(config)
