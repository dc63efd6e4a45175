"""Kafka's own command-line tools (perf tests, verifiable and console clients, admin commands),
run from the embedded broker's jars."""

from __future__ import annotations

from collections.abc import Sequence

from embedded_kafka.distribution import resolve_distribution
from embedded_kafka.java import find_java

KAFKA_TOOLS = {
    "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "topics": "org.apache.kafka.tools.TopicCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
}


def tool_command(
    name: str,
    args: list[str],
    kafka_home: str | None = None,
    jvm_options: Sequence[str] = (),
) -> list[str]:
    """The java command that runs one of Kafka's tool classes from the broker's own jars;
    `jvm_options` come after the defaults, so they win (a smaller -Xmx, a log4j2 config)."""
    main_class = KAFKA_TOOLS.get(name, name)
    return [
        str(find_java()),
        "-Xmx512m",
        "-Dlog4j2.level=WARN",
        *jvm_options,
        "-cp",
        resolve_distribution(kafka_home).classpath,
        main_class,
        *args,
    ]
