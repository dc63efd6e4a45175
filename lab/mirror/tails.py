"""Where replication stands, read from the topics themselves: the last record of each partition.

MirrorMaker 2 copies each partition in order into the same partition of the replica, and after
a restart copies again from its last committed offset: once the replica's last committed
record of every partition is the source's last, everything before it has been copied at
least once. This is only the lab's signal to stop waiting; whether every record arrived, and
how often, is for an independent read of both topics to say.
"""

from __future__ import annotations

import uuid
from types import TracebackType

from confluent_kafka import Consumer, KafkaError, TopicPartition

from dgm.contracts.headers import ID, header_map


class TopicTail:
    """Follows a topic from its start (read_committed), remembering each partition's last
    record's dgm-id (or, for a record without one, its value: the source producer's values
    are unique too); a topic that does not exist yet counts as empty until it does."""

    def __init__(self, bootstrap_servers: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.last: dict[int, str] = {}
        self.records = 0
        self._assigned = False
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap_servers,
                "group.id": f"lab-tail-{uuid.uuid4().hex[:8]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )

    def advance(self, timeout: float = 0.2) -> int:
        """Read what has arrived since; the number of records read."""
        if not self._assigned:
            metadata = self._consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
            if metadata is None or metadata.error is not None or not metadata.partitions:
                return 0
            self._consumer.assign([TopicPartition(self.topic, p, 0) for p in metadata.partitions])
            self._assigned = True
        read = 0
        for message in self._consumer.consume(1000, timeout):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"reading {self.topic}: {error}")
            partition = message.partition()
            assert partition is not None
            found = header_map(message.headers()).get(ID) or message.value() or b""
            self.last[partition] = found.decode(errors="replace")
            read += 1
        self.records += read
        return read

    def at_end(self) -> bool:
        """Read what has arrived; True once every partition is read to its high watermark
        (for a topic without transactions: everything it holds)."""
        self.advance()
        if not self._assigned:
            return False
        positions = self._consumer.position(
            [TopicPartition(self.topic, p) for p in range(self.partitions)]
        )
        return all(
            max(tp.offset, 0)
            >= self._consumer.get_watermark_offsets(tp, timeout=10, cached=False)[1]
            for tp in positions
        )

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> TopicTail:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
