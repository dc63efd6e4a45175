"""The compatibility matrix (docs/compatibility.md), a cell per supported Kafka version and
mode: a real broker dgm starts on loopback, on which

- dgm judges the lab's three topic modes and the transactional copier with random aborts, each
  SIGKILLed while records flow, exactly as an independent read of their topics says
  (tests/support/version_judged.py);
- idempotent and transactional writes are read back read_committed, exactly;
- dgm's collectors sample a transaction left open (the LSO it pins, its first offset, its
  state), a KIP-848 group where the version has them and a share group where it has them, and
  say each capability the version lacks (tests/support/version_samples.py), and `dgm check`
  passes and names the same gaps;
- the broker stops with nothing left.

One line per cell under `-s`. By default every supported version runs in one mode (CI's
compatibility matrix, about 40 s a version): 3.6.2 in KRaft mode, 3.9.2 in ZooKeeper mode,
4.0.2, 4.1.1 and 4.4.0. DGM_LONG=1 adds the other mode of the 3.x lines (`DGM_LONG=1 python -m
pytest -n 0 -s tests/scenarios/test_versions.py`).
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from dgm.clients.capabilities import capabilities
from dgm.util.waiting import wait_until
from embedded_kafka import processes
from embedded_kafka.cluster import EmbeddedCluster
from embedded_kafka.versions import KafkaRelease, version_numbers
from lab.topics import create_topic
from shell.cli import main
from tests.support.version_cells import version_cells
from tests.support.version_judged import judged_on
from tests.support.version_samples import OPEN, sampled_on

pytestmark = pytest.mark.integration
IDEMPOTENT, COMMITTED, ABORTED = 50, 10, 10

# API keys a transaction-aware monitor needs: on every supported version (all are >= 3.0).
TRANSACTION_APIS = {
    "InitProducerId": 22,
    "AddPartitionsToTxn": 24,
    "EndTxn": 26,
    "TxnOffsetCommit": 28,
    "DescribeProducers": 61,
    "DescribeTransactions": 65,
    "ListTransactions": 66,
}
LIST_OFFSETS = 2
# Told per cell: the API keys that differ between versions and modes.
REPORTED = {"ListOffsets": LIST_OFFSETS, "ConsumerGroupHeartbeat": 68, "ShareGroupHeartbeat": 76}


@pytest.mark.parametrize("release", version_cells())
def test_version_cell(
    release: KafkaRelease, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    cluster = EmbeddedCluster(tmp_path / "kafka", brokers=1, die_with_parent=True, release=release)
    try:
        cluster.start(fresh=True)
        started = time.monotonic() - began
        assert bool(cluster.zookeeper) == release.zookeeper
        pids = processes.find_pids(cluster.process_marker)
        assert len(pids) == 1 + release.zookeeper  # the broker, and its ZooKeeper
        assert listening_hosts(pids) == {"127.0.0.1"}
        judged = judged_on(cluster, release, spark, tmp_path / "judged")

        bootstrap = cluster.bootstrap_servers
        topic = create_topic(
            AdminClient({"bootstrap.servers": bootstrap}), f"v-{uuid.uuid4().hex[:8]}"
        )
        produce_idempotently(bootstrap, topic)
        produce_transactions(bootstrap, topic)
        # 50 idempotent records, 10 committed + marker, 10 aborted + marker.
        end = IDEMPOTENT + COMMITTED + ABORTED + 2
        values = read_committed(bootstrap, topic, end)
        assert values == [f"idem-{i}" for i in range(IDEMPOTENT)] + [
            f"committed-{i}" for i in range(COMMITTED)
        ]

        versions = api_versions(bootstrap)
        missing = [name for name, key in TRANSACTION_APIS.items() if key not in versions]
        assert missing == [], versions
        # Kafka 4.0 removed the oldest protocol versions (KIP-896): ListOffsets v0 among them.
        assert (versions[LIST_OFFSETS][0] > 0) == (release.major >= 4)

        # What dgm's collectors sample here, with an open transaction and the groups the
        # version has left in place: exact, and what the version lacks said as gaps.
        kip848, share = release.major >= 4, version_numbers(release.version) >= (4, 2)
        sampled, _, groups = sampled_on(bootstrap, topic, tmp_path / "dgm", kip848, share)
        assert sampled.lso == sampled.open_transaction_start == end, sampled
        assert sampled.high_watermark == end + OPEN, sampled
        assert sampled.open_transaction_state == "Ongoing", sampled
        kinds = ["consumer"] * kip848 + ["share"] * share
        assert sampled.group_types == dict(zip(groups, kinds, strict=True)), sampled
        lacking = capabilities(versions, "default", "").gaps
        told = {line.split(" on cluster ")[0] for line in sampled.gaps}
        assert told == {f"cannot see {gap.capability.sees}" for gap in lacking}, sampled
        checked = checked_gaps(bootstrap, tmp_path / "check", capsys)
        assert checked == {f"cannot see {gap.capability.sees}" for gap in lacking}
    finally:
        # As `dgm broker stop` does: from the description on disk, each JVM found by its
        # command line (ZooKeeper after the brokers); then this process reaps its children.
        described = EmbeddedCluster.load(tmp_path / "kafka")
        stubborn = described.stop() if described else []
        stubborn += cluster.stop()
    assert stubborn == []
    assert processes.find_pids(cluster.process_marker) == []
    reported = ", ".join(f"{name} {_span(versions.get(key))}" for name, key in REPORTED.items())
    print(
        f"\n{release.label}: started in {started:.1f}s, idempotent + transactional writes and "
        f"read_committed exact, stopped clean; {reported}; sampled: LSO {sampled.lso} at the "
        f"open transaction, groups {sorted(sampled.group_types.values())}, gaps "
        f"{sorted(g.split(' on cluster ')[0].removeprefix('cannot see ') for g in sampled.gaps)}"
        f"; judged: {judged}; total {time.monotonic() - began:.1f}s"
    )


def checked_gaps(bootstrap: str, folder: Path, capsys: pytest.CaptureFixture[str]) -> set[str]:
    """What `dgm check` says the cluster cannot answer: it must pass (exit 0, no ✗; a gap is
    no failure) and name each gap as a `!` line."""
    folder.mkdir()
    config = folder / "dgm.toml"
    config.write_text(f'state_dir = "{folder}"\n[cluster]\nbootstrap_servers = "{bootstrap}"\n')
    capsys.readouterr()
    code = main(["check", "--config", str(config)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and not [line for line in lines if line.startswith("✗ ")], lines
    gaps = [line.removeprefix("! ") for line in lines if line.startswith("! cannot see ")]
    return {line.split(" on cluster ")[0] for line in gaps}


def produce_idempotently(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    offsets: list[int] = []
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error)
        offsets.append(message.offset() or 0)

    for i in range(IDEMPOTENT):
        producer.produce(topic, value=f"idem-{i}", on_delivery=delivered)
    assert producer.flush(30) == 0 and errors == []
    assert sorted(offsets) == list(range(IDEMPOTENT))  # each once, none lost


def produce_transactions(bootstrap: str, topic: str) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"smoke-{uuid.uuid4().hex[:8]}"}
    )
    producer.init_transactions(60)
    for label, count, end in (
        ("committed", COMMITTED, producer.commit_transaction),
        ("aborted", ABORTED, producer.abort_transaction),
    ):
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, value=f"{label}-{i}")
        assert producer.flush(30) == 0  # else aborting purges the records before they are sent
        end(60)


def read_committed(bootstrap: str, topic: str, end: int) -> list[str]:
    """Every value a read_committed consumer gets until its position reaches `end`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"smoke-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[str] = []

    def reached() -> bool:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(bytes(message.value() or b"").decode())
        return bool(consumer.position([TopicPartition(topic, 0)])[0].offset >= end)

    try:
        wait_until(reached, 60, f"a read_committed consumer to reach offset {end}", interval=0)
    finally:
        consumer.close()
    return values


def api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    """The broker's own ApiVersions answer (v0, which every Kafka serves, sent on a plain
    socket: no client's list of known APIs in between): each API key with its version span."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    request = struct.pack(">hhih", 18, 0, 1, 5) + b"smoke"  # key, version, correlation, client
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", _read(sock, 4))[0]
        body = _read(sock, size)
    correlation, error, count = struct.unpack(">ihi", body[:10])
    assert (correlation, error) == (1, 0)
    spans = (struct.unpack(">hhh", body[10 + 6 * i : 16 + 6 * i]) for i in range(count))
    return {key: (low, high) for key, low, high in spans}


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the broker closed the connection"
        data += chunk
    return data


def listening_hosts(pids: list[int]) -> set[str]:
    """The addresses the processes' listening TCP sockets are bound to (from /proc)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except FileNotFoundError:  # closed meanwhile
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    hosts = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                hosts.add(_host(fields[1].split(":")[0]))
    return hosts


def _span(span: tuple[int, int] | None) -> str:
    return f"v{span[0]}-v{span[1]}" if span else "absent"


def _host(hexadecimal: str) -> str:
    """/proc/net/tcp's address: IPv4 little-endian, or IPv6 (an IPv4-mapped one for loopback)."""
    raw = bytes.fromhex(hexadecimal[-8:])[::-1]
    if len(hexadecimal) == 32 and hexadecimal[:24] != "0000000000000000FFFF0000":
        return f"ipv6 {hexadecimal}"
    return ".".join(str(b) for b in raw)
