"""The brokers' ApiVersions as the cluster's capabilities: every broker asked, the oldest
decides, and the Kafka line told as kafka-python tells it."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.api_versions import _ask, kafka_line
from dgm.clients.capabilities import KIP848_GROUPS, SHARE_GROUPS
from tests.support.api_versions import KAFKA_3_6, KAFKA_4_1


@dataclass
class Answer:
    api_versions: dict[int, tuple[int, int]]


class Admin:
    """kafka-python's admin client as far as the ask uses it: each broker's answer."""

    def __init__(self, answers: dict[int, dict[int, tuple[int, int]]]) -> None:
        self.answers = answers

    def get_broker_version_data(self, broker_id: int) -> Answer:
        return Answer(self.answers[broker_id])

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return self.answers[min(self.answers)]


def test_a_cluster_mid_upgrade_answers_as_its_oldest_broker() -> None:
    found = _ask(Admin({1: KAFKA_4_1, 2: KAFKA_3_6}), "east", [1, 2])
    assert found.broker == "3.6"
    assert [g.capability for g in found.gaps] == [KIP848_GROUPS, SHARE_GROUPS]
    assert _ask(Admin({1: KAFKA_4_1}), "east", [1]).gaps == ()


def test_without_brokers_in_the_metadata_the_bootstrap_broker_answers() -> None:
    assert _ask(Admin({7: KAFKA_3_6}), "x", []).broker == "3.6"


def test_the_kafka_line_as_the_api_versions_tell_it() -> None:
    assert kafka_line([KAFKA_3_6]) == "3.6"
    assert kafka_line([KAFKA_4_1]) == "4.1"
    # DescribeLogDirs v5 came with 4.3: a newer broker is told "4.3 or later".
    assert kafka_line([{**KAFKA_4_1, 35: (1, 5)}]) == "4.3 or later"
