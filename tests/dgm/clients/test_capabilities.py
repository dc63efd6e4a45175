"""ApiVersions as dgm's capabilities: what each broker version can answer, a gap said the way a
missing permission is, and docs/compatibility.md's table equal to the code's."""

from __future__ import annotations

from pathlib import Path

from dgm.clients.capabilities import (
    CAPABILITIES,
    KIP848_GROUPS,
    LSO,
    OPEN_TRANSACTIONS,
    SHARE_GROUPS,
    capabilities,
    common,
)
from tests.support.api_versions import KAFKA_3_6, KAFKA_3_9, KAFKA_4_1

PAGE = Path(__file__).resolve().parents[3] / "docs" / "compatibility.md"


def test_kafka_3_6_lacks_kip848_and_share_groups_only() -> None:
    found = capabilities(KAFKA_3_6, "default", "3.6")
    assert [g.capability for g in found.gaps] == [KIP848_GROUPS, SHARE_GROUPS]
    assert found.has(OPEN_TRANSACTIONS) and found.has(LSO)
    assert [g.line() for g in found.gaps] == [
        "cannot see consumer groups of the KIP-848 protocol on cluster default: the broker "
        "(3.6) has no ConsumerGroupHeartbeat and no ConsumerGroupDescribe",
        "cannot see share groups on cluster default: the broker (3.6) has no "
        "ShareGroupDescribe and no DescribeShareGroupOffsets",
    ]
    assert found.gaps[0].fix() == "upgrade the cluster's brokers to Kafka 4.0 or later"


def test_kip848_early_access_on_3_9_is_a_gap_said_precisely() -> None:
    found = capabilities(KAFKA_3_9, "east", "3.9")
    gap = found.gap(KIP848_GROUPS)
    assert gap is not None
    assert gap.line() == (
        "cannot see consumer groups of the KIP-848 protocol on cluster east: the broker (3.9) "
        "has ConsumerGroupHeartbeat v0 only (v0 is KIP-848's early access; dgm counts it from "
        "v1, Kafka 4.0)"
    )


def test_kafka_4_1_answers_everything() -> None:
    found = capabilities(KAFKA_4_1, "default", "4.1")
    assert found.gaps == ()
    assert found.present == CAPABILITIES


def test_a_missing_api_is_a_gap_of_what_needs_it() -> None:
    without = {k: v for k, v in KAFKA_3_6.items() if k != 66}
    gap = capabilities(without, "x", "2.8").gap(OPEN_TRANSACTIONS)
    assert gap is not None
    assert gap.line() == "cannot see open transactions on cluster x: the broker (2.8) has no " \
        "ListTransactions"  # fmt: skip


def test_a_cluster_answers_what_every_broker_serves() -> None:
    upgraded = {**KAFKA_3_6, 68: (0, 1), 69: (0, 1)}
    assert common([KAFKA_3_6, upgraded]) == KAFKA_3_6  # the old broker decides
    assert common([{2: (0, 8)}, {2: (1, 10)}]) == {2: (1, 8)}
    assert common([{2: (0, 0)}, {2: (1, 10)}]) == {}  # no version both serve
    assert common([]) == {}


def page_rows() -> list[list[str]]:
    section = PAGE.read_text().split("\n## Capabilities\n", 1)[1].split("\n## ", 1)[0]
    table = section.split("\n| capability |", 1)[1].split("\n\n", 1)[0]
    lines = [line for line in table.splitlines() if line.startswith("| ")]  # header split off
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_page_shows_each_capability_and_no_other() -> None:
    rows = page_rows()
    assert len(rows) == len(CAPABILITIES)
    for capability, (name, apis, since, used_for, sees) in zip(CAPABILITIES, rows, strict=True):
        assert (name, apis, since) == (capability.name, capability.api_names(), capability.since)
        assert (used_for, sees) == (capability.used_for, capability.sees)
