"""dgm's schema fetcher against a real registry: schemas registered by confluent-kafka's own
client (as producers register them) come back by id with their text, format and references;
an unknown id, an unreachable registry and a missing API are errors with a reason."""

from __future__ import annotations

import io
import json
import logging
import pickle
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from dgm.clients.schema_registry import RegistrySchemas, cluster_schemas
from dgm.config.cluster import ClusterConfig
from dgm.config.problems import ConfigError
from dgm.config.schema_registry import SchemaRegistryConfig
from dgm.contracts.registered_schemas import RegisteredSchema, SchemaLookup, SchemaLookupError
from dgm.util.ports import free_ports
from tests.support.schema_registry import RegistryUnderTest

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "dgm.test",
    "fields": [{"name": "order_id", "type": "string"}, {"name": "cents", "type": "long"}],
}
ORDER_V2 = {  # v1 and an added optional field: the re-serializing pipeline's writer schema
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}
MONEY_PROTO = 'syntax = "proto3";\npackage dgm.test;\n\nmessage Money {\n  int64 cents = 1;\n}\n'
PAYMENT_PROTO = (
    'syntax = "proto3";\npackage dgm.test;\n\nimport "dgm/test/money.proto";\n\n'
    "message Payment {\n  string payment_id = 1;\n  Money amount = 2;\n}\n"
)
SHIPMENT_JSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Shipment",
    "type": "object",
    "properties": {"shipment_id": {"type": "string"}, "weight": {"type": "number"}},
    "required": ["shipment_id"],
}


class Registered:
    """Schemas registered once for the module, each under subjects of its own."""

    def __init__(self, registry: RegistryUnderTest) -> None:
        client = SchemaRegistryClient(registry.client_config())
        run = uuid.uuid4().hex[:8]
        self.orders = f"orders-{run}-value"
        self.money = f"dgm/test/money-{run}.proto"
        self.payments = f"payments-{run}-value"
        self.shipments = f"shipments-{run}-value"
        self.avro_v1 = client.register_schema(self.orders, Schema(json.dumps(ORDER_V1), "AVRO"))
        self.avro_v2 = client.register_schema(self.orders, Schema(json.dumps(ORDER_V2), "AVRO"))
        self.money_id = client.register_schema(self.money, Schema(MONEY_PROTO, "PROTOBUF"))
        reference = SchemaReference("dgm/test/money.proto", self.money, 1)
        self.payment_id = client.register_schema(
            self.payments, Schema(PAYMENT_PROTO, "PROTOBUF", [reference])
        )
        self.json_id = client.register_schema(
            self.shipments, Schema(json.dumps(SHIPMENT_JSON), "JSON")
        )
        self.texts = {
            self.avro_v1: json.dumps(ORDER_V1),
            self.avro_v2: json.dumps(ORDER_V2),
            self.money_id: MONEY_PROTO,
            self.payment_id: PAYMENT_PROTO,
            self.json_id: json.dumps(SHIPMENT_JSON),
        }


@pytest.fixture(scope="module")
def registered(schema_registry: RegistryUnderTest) -> Registered:
    return Registered(schema_registry)


def test_each_format_comes_back_by_its_content_id(
    schema_registry: RegistryUnderTest, registered: Registered
) -> None:
    schemas: SchemaLookup = RegistrySchemas(schema_registry.dgm_config())
    avro_v1, avro_v2 = schemas.schema(registered.avro_v1), schemas.schema(registered.avro_v2)
    assert avro_v1 == RegisteredSchema(registered.avro_v1, "AVRO", json.dumps(ORDER_V1))
    assert avro_v2 == RegisteredSchema(registered.avro_v2, "AVRO", json.dumps(ORDER_V2))
    assert registered.avro_v1 != registered.avro_v2  # a new version, a new id in the framing
    shipment = schemas.schema(registered.json_id, "content")
    assert shipment == RegisteredSchema(registered.json_id, "JSON", json.dumps(SHIPMENT_JSON))
    # confluent-kafka's own client reads back what dgm reads.
    client = SchemaRegistryClient(schema_registry.client_config())
    for schema_id, text in registered.texts.items():
        assert client.get_schema(schema_id).schema_str == text == schemas.schema(schema_id).text


def test_a_record_serialized_by_confluent_kafka_decodes_with_the_fetched_schema(
    schema_registry: RegistryUnderTest, registered: Registered
) -> None:
    client = SchemaRegistryClient(schema_registry.client_config())
    serializer = AvroSerializer(client, json.dumps(ORDER_V2))
    topic = registered.orders.removesuffix("-value")  # the default subject: <topic>-value
    record = {"order_id": "o-1", "cents": 1250, "note": "gift"}
    framed = serializer(record, SerializationContext(topic, MessageField.VALUE))
    assert framed is not None and framed[0] == 0  # Confluent's framing: magic byte, 4-byte id
    schema_id = int.from_bytes(framed[1:5], "big")
    assert schema_id == registered.avro_v2
    writer = RegistrySchemas(schema_registry.dgm_config()).schema(schema_id)
    parsed = fastavro.parse_schema(json.loads(writer.text))
    assert fastavro.schemaless_reader(io.BytesIO(framed[5:]), parsed) == record


def test_a_protobuf_import_is_resolved_under_its_name(
    schema_registry: RegistryUnderTest, registered: Registered
) -> None:
    payment = RegistrySchemas(schema_registry.dgm_config()).schema(registered.payment_id)
    money = RegisteredSchema(registered.money_id, "PROTOBUF", MONEY_PROTO)
    assert payment == RegisteredSchema(
        registered.payment_id,
        "PROTOBUF",
        PAYMENT_PROTO,
        references=(money,),
        reference_names=("dgm/test/money.proto",),
    )


def test_each_schema_is_fetched_once_per_run(
    schema_registry: RegistryUnderTest, registered: Registered
) -> None:
    schemas = RegistrySchemas(schema_registry.dgm_config())
    first = schemas.schema(registered.payment_id)
    after_first = schemas.counts()
    assert (after_first.lookups, after_first.cache_hits) == (1, 0)
    # The import was resolved on the way, so asking for it costs no request either.
    assert schemas.schema(registered.money_id) == first.references[0]
    assert schemas.schema(registered.payment_id) is first
    counts = schemas.counts()
    assert (counts.lookups, counts.requests, counts.failures) == (3, after_first.requests, 0)
    assert counts.cache_hits == 2  # the import and the payment


def test_an_unknown_id_is_not_found_and_asked_once(schema_registry: RegistryUnderTest) -> None:
    schemas = RegistrySchemas(schema_registry.dgm_config())
    for _ in range(3):
        with pytest.raises(SchemaLookupError) as missing:
            schemas.schema(987_654_321)
        assert missing.value.reason == "not found"
        assert "987654321" in str(missing.value)
    counts = schemas.counts()
    assert (counts.lookups, counts.requests, counts.cache_hits, counts.failures) == (3, 1, 2, 1)


def _apicurio(registry: RegistryUnderTest) -> str:
    api = registry.dgm_config().api_url()
    if api is None:
        pytest.skip("DGM_SCHEMA_REGISTRY_URL is no Apicurio ccompat URL: no globalIds")
    return api


def _global_id(api: str, subject: str, version: int) -> int:
    artifact = urllib.parse.quote(subject, safe="")
    url = f"{api}/groups/default/artifacts/{artifact}/versions/{version}"
    with urllib.request.urlopen(url, timeout=10) as response:
        meta: dict[str, Any] = json.loads(response.read())
    return int(meta["globalId"])


def test_apicurio_global_ids_are_served_too(
    schema_registry: RegistryUnderTest, registered: Registered
) -> None:
    api = _apicurio(schema_registry)
    schemas = RegistrySchemas(schema_registry.dgm_config())
    v2 = _global_id(api, registered.orders, 2)
    assert schemas.schema(v2, "global") == RegisteredSchema(v2, "AVRO", json.dumps(ORDER_V2))
    payment, money = _global_id(api, registered.payments, 1), _global_id(api, registered.money, 1)
    assert schemas.schema(payment, "global") == RegisteredSchema(
        payment,
        "PROTOBUF",
        PAYMENT_PROTO,
        references=(RegisteredSchema(money, "PROTOBUF", MONEY_PROTO),),
        reference_names=("dgm/test/money.proto",),
    )
    shipment = _global_id(api, registered.shipments, 1)
    assert schemas.schema(shipment, "global").format == "JSON"
    with pytest.raises(SchemaLookupError) as missing:
        schemas.schema(987_654_321, "global")
    assert missing.value.reason == "not found"


def test_a_global_id_without_apicurio_s_api_is_unsupported() -> None:
    plain = SchemaRegistryConfig(url="http://127.0.0.1:9/registry")
    with pytest.raises(SchemaLookupError) as refused:
        RegistrySchemas(plain).schema(1, "global")
    assert refused.value.reason == "unsupported"
    assert "apicurio_url" in str(refused.value)


def test_an_unreachable_registry_is_retried_then_told(caplog: pytest.LogCaptureFixture) -> None:
    port = free_ports(1)[0]  # nothing listens there: every connection is refused
    secret = "never-in-a-log-" + uuid.uuid4().hex
    config = SchemaRegistryConfig(
        url=f"http://127.0.0.1:{port}", username="dgm", password=secret, retries=2
    )
    slept: list[float] = []
    schemas = RegistrySchemas(config, sleep=slept.append)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(SchemaLookupError) as unreachable:
        schemas.schema(1)
    assert unreachable.value.reason == "unreachable"
    assert slept == [0.2, 0.4]  # a doubling backoff, as many waits as retries
    counts = schemas.counts()
    assert (counts.requests, counts.retries, counts.failures) == (3, 2, 1)
    with pytest.raises(SchemaLookupError):  # a transient failure is not remembered
        schemas.schema(1)
    assert schemas.counts().requests == 6
    assert secret not in caplog.text
    assert secret not in str(unreachable.value)
    assert "127.0.0.1" in caplog.text  # the requests were logged, without the credentials


def test_tls_files_that_cannot_be_read_are_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing-ca.pem"
    with pytest.raises(ConfigError) as refused:
        RegistrySchemas(SchemaRegistryConfig(url="https://r:8081", ca_file=missing))
    assert str(refused.value).startswith("schema_registry: cannot load ca_file")


def test_a_lookup_travels_pickled_with_its_cache(
    schema_registry: RegistryUnderTest, registered: Registered
) -> None:
    schemas = RegistrySchemas(schema_registry.dgm_config())
    payment = schemas.schema(registered.payment_id)
    with pytest.raises(SchemaLookupError):
        schemas.schema(987_654_320)
    copy = pickle.loads(pickle.dumps(schemas))  # as Spark ships it to an executor
    assert copy.schema(registered.payment_id) == payment
    with pytest.raises(SchemaLookupError) as missing:
        copy.schema(987_654_320)
    assert missing.value.reason == "not found"
    assert copy.counts().requests == schemas.counts().requests  # both from the cache
    assert copy.schema(registered.avro_v1).text == json.dumps(ORDER_V1)  # and it still asks


def test_a_cluster_without_a_registry_has_no_lookup() -> None:
    assert cluster_schemas(ClusterConfig()) is None
    with_one = ClusterConfig(schema_registry=SchemaRegistryConfig(url="http://r:8081"))
    assert isinstance(cluster_schemas(with_one), RegistrySchemas)
