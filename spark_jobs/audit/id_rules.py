"""Every monitored topic's message id rule (docs/design.md, "Message identity and the audit
headers"): a topic has one rule, as a fingerprint holds one id."""

from __future__ import annotations

from dgm.config.document import DgmConfig
from dgm.config.pipelines import MessageIdRule, id_rule_conflicts
from dgm.util.errors import UserFacingError


class ConflictingIdRules(UserFacingError):
    """Two pipelines monitor one topic with different message id rules."""


def topic_rules(config: DgmConfig) -> dict[str, MessageIdRule]:
    """Every monitored topic (any pipeline's source or sink topic) and its id rule: a source
    topic takes its pipeline's source rule, a sink topic the sink rule (PipelineConfig)."""
    for _, problem in id_rule_conflicts(config.pipelines):
        raise ConflictingIdRules(problem)
    rules: dict[str, MessageIdRule] = {}
    for pipeline in config.pipelines:
        for topic, rule, _ in pipeline.topic_id_rules():
            rules.setdefault(topic, rule)
    return dict(sorted(rules.items()))
