"""Topics whose message id rule changed since they were audited: their fingerprints hold ids
the new rule would not find (a `hash` where the rule now reads a field, a field renamed), so
they are forgotten like a recreated topic's (recreated.forget_topics) and audited again from
their start. Without this a changed rule was silently ignored: the kept ids went on being
judged under the old one. Each batch's manifest records every topic's rule when it was written
(batches.new_manifest), so a topic's rule is the one of the batches holding its ranges."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import SparkSession

from dgm.config.pipelines import MessageIdRule
from spark_jobs.audit.batches import Batch
from spark_jobs.audit.recreated import forget_topics
from spark_jobs.audit.store import FingerprintStore

Progress = Callable[[str], None]


def changed_rules(
    batches: Sequence[Batch], current: Mapping[str, MessageIdRule]
) -> dict[str, tuple[MessageIdRule, MessageIdRule]]:
    """topic -> (a rule some of its batches were audited with, its rule now), for the topics
    audited under a rule that does not find the same ids as today's."""
    found: dict[str, tuple[MessageIdRule, MessageIdRule]] = {}
    for batch in batches:
        used = batch.manifest.get("id_rules", {})
        for topic in sorted({r["topic"] for r in batch.ranges}):
            now, then = current.get(topic), used.get(topic)
            if now is None or then is None or topic in found:
                continue
            old = MessageIdRule(**then)
            if not old.same_as(now):
                found[topic] = (old, now)
    return found


def drop_changed_rules(
    spark: SparkSession,
    store: FingerprintStore,
    rules: Mapping[str, MessageIdRule],
    progress: Progress,
) -> dict[str, tuple[MessageIdRule, MessageIdRule]]:
    """The audit's step for topics whose id rule changed: forgotten (changed_rules' answer), so
    they are audited from their start under the new rule. Call under the store's writer lock."""
    changed = changed_rules(store.complete_batches(), rules)
    for topic, (old, new) in changed.items():
        progress(
            f"audit: topic {topic}'s message id rule changed ({_told(old)} -> {_told(new)}): "
            "its fingerprints are dropped and it is audited again from its start"
        )
    if changed:
        forget_topics(spark, store.state_dir, changed)
    return changed


def _told(rule: MessageIdRule) -> str:
    return rule.kind if rule.kind in ("key", "hash") else f"{rule.kind} {rule.name!r}"
