"""The watch under enforced ACLs: Describe and Read on the sink topic are all it needs.

librdkafka asks for the coordinator of the group id a consumer must be given ("dgm-watch"),
though the watch never joins it or commits: refused that, it reads on."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

from confluent_kafka import Producer

from dgm.clients.permissions import TOPIC_DESCRIBE, TOPIC_READ
from dgm.config.document import DgmConfig
from dgm.util.waiting import wait_until
from tests.support.secured_kafka import DGM_USER, SecuredKafka, acl
from tests.support.watched_pipelines import sink_pipeline
from watch.loop import Watch, watched_topics
from watch.publish import published_seen
from watch.reader import SinkReader


def test_the_watch_reads_with_topic_rights_only(kafka_sasl: SecuredKafka, tmp_path: Path) -> None:
    sink = kafka_sasl.new_topic("watch-secured")
    rights = [acl(DGM_USER, p, sink) for p in (TOPIC_DESCRIBE, TOPIC_READ)]
    kafka_sasl.grant(rights)
    pipeline = sink_pipeline("p", sink)
    routes = watched_topics(DgmConfig(pipelines=(pipeline,)))
    client = {"bootstrap.servers": kafka_sasl.bootstrap_servers, **kafka_sasl.scram_client()}
    reader = SinkReader(client, routes["default"], lookback=100)
    watch = Watch(tmp_path, {"default": reader}, routes, 100, timedelta(hours=1))
    stop = threading.Event()
    running = threading.Thread(target=watch.run, args=(stop,), daemon=True)
    running.start()
    try:
        producer = Producer(kafka_sasl.admin_config())
        for found in ("x", "y", "x"):
            producer.produce(sink, value=b"v", headers=[("dgm-id", found.encode())])
        assert producer.flush(30) == 0
        told = wait_until(lambda: published_seen(tmp_path), 60, "the duplicate of x")
        assert [(r["message_id"], r["offset"], r["first_offset"]) for r in told] == [("x", 2, 0)]
    finally:
        stop.set()
        running.join(30)
        reader.close()
        kafka_sasl.revoke(rights)
