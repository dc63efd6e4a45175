"""The registry_field id kind: checked like json_field, compared by its path."""

from __future__ import annotations

from pathlib import Path

from dgm.config.loader import load_config
from dgm.config.pipelines import MessageIdRule


def test_a_registry_field_needs_a_dotted_path() -> None:
    assert list(MessageIdRule("registry_field", "order.id").problems()) == []
    for bad in ("", "order.", ".id", "a..b"):
        problems = list(MessageIdRule("registry_field", bad).problems())
        assert problems == [("name", f"expected a dotted path like 'order.id', got {bad!r}")]


def test_two_registry_rules_agree_only_on_one_path() -> None:
    rule = MessageIdRule("registry_field", "order.id")
    assert rule.same_as(MessageIdRule("registry_field", "order.id"))
    assert not rule.same_as(MessageIdRule("registry_field", "id"))
    assert not rule.same_as(MessageIdRule("json_field", "order.id"))


def test_a_registry_field_rule_loads_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "dgm.toml"
    path.write_text(
        '[[pipelines]]\nname = "orders"\nsource_topics = ["orders"]\nsink_topics = ["out"]\n'
        'consumer_group = "app"\ndeclared_semantic = "at-least-once"\n'
        '[pipelines.message_id]\nkind = "registry_field"\nname = "order.id"\n',
        encoding="utf-8",
    )
    loaded = load_config(path).pipeline("orders")
    assert loaded.message_id == MessageIdRule("registry_field", "order.id")
