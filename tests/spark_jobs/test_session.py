"""The session every Spark job uses resolves the Spark Kafka source and reads a real topic."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer


def write_committed_and_aborted(kafka: Any, topic: str) -> None:
    producer = Producer(kafka.client_config(**{"transactional.id": f"spark-{uuid.uuid4().hex}"}))
    producer.init_transactions(30)
    for end, label in ((producer.commit_transaction, "kept"), (producer.abort_transaction, "gone")):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, value=f"{label}-{i}", headers=[("dgm-id", f"{label}-{i}")])
        producer.flush(30)  # abort_transaction purges what was not sent yet: send it first
        end(30)


def test_kafka_source_sees_isolation_levels_and_headers(spark: Any, kafka: Any) -> None:
    topic = kafka.new_topic("spark")
    write_committed_and_aborted(kafka, topic)

    def read(isolation: str) -> list[Any]:
        frame = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .option("includeHeaders", "true")
            .option("kafka.isolation.level", isolation)
            .load()
        )
        return sorted(frame.select("offset", "value", "headers").collect())

    committed = read("read_committed")
    everything = read("read_uncommitted")
    assert [r.value.decode() for r in committed] == ["kept-0", "kept-1", "kept-2"]
    assert [r.value.decode() for r in everything] == [
        "kept-0",
        "kept-1",
        "kept-2",
        "gone-0",
        "gone-1",
        "gone-2",
    ]
    assert [r.offset for r in everything] == [0, 1, 2, 4, 5, 6]  # the commit marker is at 3
    assert {(h.key, bytes(h.value).decode()) for h in everything[0].headers} == {
        ("dgm-id", "kept-0")
    }


# 127.0.0.1, as IPv4 and IPv4-mapped IPv6, and ::1, in /proc/net's byte order.
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


def _listening_addresses(port: int) -> set[str]:
    """Local addresses (hex, as /proc shows them) of the sockets listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_the_spark_ui_of_a_local_session_listens_on_loopback_only(spark: Any) -> None:
    url = spark.sparkContext.uiWebUrl
    assert url is not None, "the Spark UI is off"
    addresses = _listening_addresses(int(url.rsplit(":", 1)[1]))
    assert addresses and addresses <= LOOPBACK, addresses  # never 0.0.0.0 or ::


def test_whoever_finds_the_running_session_does_not_stop_it(spark: Any) -> None:
    """`dgm check` and an analysis job built without a session reuse the one running in the
    process, from any thread, and leave it running: one of them stopped the tests' shared
    session once, and every Spark test after it failed."""
    import threading

    from dgm.config.document import DgmConfig
    from shell.check_command import _spark_session
    from spark_jobs.job import AnalysisJob

    found: list[tuple[Any, bool]] = []
    other = threading.Thread(target=lambda: found.append(_spark_session()))
    other.start()
    other.join(60)
    assert found and found[0][0].sparkContext is spark.sparkContext
    assert found[0][1] is False  # not started there: not stopped there

    job = AnalysisJob(DgmConfig(), "127.0.0.1:9", master="local[2]", progress=lambda _: None)
    assert job.spark.sparkContext is spark.sparkContext
    job.close()
    assert spark.range(3).count() == 3  # still running


def test_a_local_session_collects_with_parallel_gc_unless_the_environment_chose(
    spark: Any,
) -> None:
    from spark_jobs.session import gc_chosen

    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    names = {bean.getName() for bean in beans.getGarbageCollectorMXBeans()}
    if not gc_chosen(os.environ):
        assert names == {"PS Scavenge", "PS MarkSweep"}, names
    # Two collectors make the JVM refuse to start: the environment's choice wins.
    assert gc_chosen({"JAVA_TOOL_OPTIONS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"})
    assert gc_chosen({"_JAVA_OPTIONS": "-Xmx1g -XX:+UseZGC"})
    assert not gc_chosen({"JDK_JAVA_OPTIONS": "-Xmx1g -XX:+UseCompressedOops"})
