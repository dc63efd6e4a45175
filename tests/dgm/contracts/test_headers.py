from __future__ import annotations

import pytest

from dgm.contracts.headers import ID, PRODUCER, SEQ, SRC, format_src, header_map, parse_src


def test_header_names_are_the_design_guides() -> None:
    assert (ID, PRODUCER, SEQ, SRC) == ("dgm-id", "dgm-producer", "dgm-seq", "dgm-src")


@pytest.mark.parametrize("topic", ["orders", "a.b-c_d", "with/slash"])
def test_src_round_trips(topic: str) -> None:
    text = format_src(topic, 3, 1234)
    assert parse_src(text) == (topic, 3, 1234)
    assert parse_src(text.encode()) == (topic, 3, 1234)


@pytest.mark.parametrize("bad", ["", "orders", "orders/1", "/1/2", "orders/x/2", "orders/1/-2"])
def test_malformed_src_is_a_value_error(bad: str) -> None:
    with pytest.raises(ValueError, match="dgm-src"):
        parse_src(bad)


def test_header_map_last_value_wins_and_skips_nulls() -> None:
    headers = [(ID, b"a"), (SEQ, b"1"), (ID, b"b"), (PRODUCER, None)]
    assert header_map(headers) == {ID: b"b", SEQ: b"1"}
    assert header_map(None) == {}
    assert header_map({ID: "a", SEQ: b"2", PRODUCER: None}) == {ID: b"a", SEQ: b"2"}
