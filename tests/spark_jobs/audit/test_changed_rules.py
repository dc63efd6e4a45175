"""changed_rules: a topic audited under a rule that finds other ids than today's is named with
both rules; a rule equal in effect (a header's name for `key`), a topic no longer monitored or
a batch written before manifests held rules are no change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dgm.config.pipelines import MessageIdRule
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.changed_rules import changed_rules

FIELD = MessageIdRule("registry_field", "order_id")
HASH = MessageIdRule("hash")


def batch(rules: dict[str, MessageIdRule] | None, *topics: str) -> Batch:
    manifest: dict[str, Any] = {"ranges": [{"topic": t, "partition": 0} for t in topics]}
    if rules is not None:
        manifest["id_rules"] = {t: {"kind": r.kind, "name": r.name} for t, r in rules.items()}
    return Batch(Path("b"), manifest)


def test_a_topic_audited_under_another_rule_is_named_with_both() -> None:
    batches = [
        batch({"src": FIELD, "sink": FIELD}, "src", "sink"),
        batch({"src": HASH, "sink": HASH, "other": HASH}, "sink"),  # src not in this batch
    ]
    now = {"src": HASH, "sink": HASH, "other": HASH}
    assert changed_rules(batches, now) == {"src": (FIELD, HASH), "sink": (FIELD, HASH)}


def test_same_ids_unmonitored_topics_and_old_manifests_are_no_change() -> None:
    key, renamed_key = MessageIdRule("key", "a"), MessageIdRule("key", "b")
    batches = [batch({"t": key}, "t", "gone"), batch(None, "t")]
    assert changed_rules(batches, {"t": renamed_key}) == {}
    assert changed_rules(batches, {"t": FIELD}) == {"t": (key, FIELD)}
