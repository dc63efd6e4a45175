"""ProcessorSettings travel as JSON: every mistake is named, nothing is guessed."""

from __future__ import annotations

import json
import re

import pytest

from lab.processors.settings import ProcessorSettings, SettingsError

GOOD = ProcessorSettings("127.0.0.1:9092", "src", "grp", sink_topic="sink", client={"a": "b"})


def test_round_trip() -> None:
    assert ProcessorSettings.from_json(GOOD.to_json()) == GOOD


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"batch_size": 0}, "batch_size: expected >= 1"),
        ({"batch_size": True}, "batch_size: expected int"),
        ({"step_delay": -1}, "step_delay: expected >= 0"),
        ({"group_id": ""}, "group_id: expected a non-empty string"),
        ({"client": {"x": 1}}, "client: expected dict"),
        ({"colour": "red"}, "unknown keys ['colour']"),
    ],
)
def test_mistakes_are_named(change: dict[str, object], expected: str) -> None:
    data = {**json.loads(GOOD.to_json()), **change}
    with pytest.raises(SettingsError, match=re.escape(expected)):
        ProcessorSettings.from_json(json.dumps(data))


def test_not_json_and_missing_keys() -> None:
    with pytest.raises(SettingsError, match="not JSON"):
        ProcessorSettings.from_json("{")
    with pytest.raises(SettingsError, match="must be a JSON object"):
        ProcessorSettings.from_json("[]")
    with pytest.raises(SettingsError, match="group_id"):
        ProcessorSettings.from_json('{"bootstrap_servers": "b", "source_topic": "s"}')


def test_mode_check() -> None:
    assert GOOD.with_mode_check("at-least-once") is GOOD
    with pytest.raises(SettingsError, match="unknown mode"):
        GOOD.with_mode_check("twice")
    with pytest.raises(SettingsError, match="sink_path"):
        GOOD.with_mode_check("idempotent-sink")
