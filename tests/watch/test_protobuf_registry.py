"""Protobuf records as confluent-kafka's ProtobufSerializer frames them, through the real
schema registry: the schema the registry hands back (with its reference) compiles, the
indexes the serializer writes name the message (a nested one too), and the ids are the ones
written. The message classes are generated at test time (tests/support/protobuf_classes.py).
"""

from __future__ import annotations

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from dgm.clients.schema_registry import RegistrySchemas
from dgm.contracts import registry_framing as framing
from dgm.contracts.protobuf_ids import ProtobufDecoder, protobuf_decoder
from tests.support.protobuf_classes import message_classes
from tests.support.schema_registry import RegistryUnderTest


def test_the_watch_reads_what_the_protobuf_serializer_wrote(
    schema_registry: RegistryUnderTest,
) -> None:
    classes = message_classes()
    client = SchemaRegistryClient(schema_registry.client_config())
    context = SerializationContext("protobuf-orders", MessageField.VALUE)
    config = {"use.deprecated.format": False}
    order = ProtobufSerializer(classes["dgm.test.Order"], client, config)
    line = ProtobufSerializer(classes["dgm.test.Order.Line"], client, config)
    values = [
        order(classes["dgm.test.Order"](order={"id": "o-1"}, amount=3), context),
        order(classes["dgm.test.Order"](amount=4), context),  # no order: no id
        line(classes["dgm.test.Order.Line"](id="l-1"), context),
    ]
    lookup = RegistrySchemas(schema_registry.dgm_config())
    found = []
    for value in values:
        framed = framing.unframe(value, None)
        assert isinstance(framed, framing.Framed)
        schema = lookup.schema(framed.schema_id, framed.id_kind)
        assert schema.format == "PROTOBUF" and schema.references  # common.proto, resolved
        decoder = protobuf_decoder(schema)
        assert isinstance(decoder, ProtobufDecoder)
        found.append(decoder.find(framed.payload, "order.id" if value != values[2] else "id"))
    assert found == [("o-1", None), (None, framing.FIELD_MISSING), ("l-1", None)]
