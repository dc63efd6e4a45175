"""SeenIds: which copy of an id is the extra one, told once, in any reading order."""

from __future__ import annotations

import itertools

import pytest

from watch.seen import Copy, Duplicate, SeenIds


def extras(order: list[Copy], max_ids: int = 10) -> list[Duplicate]:
    seen = SeenIds(max_ids)
    found = [seen.see("p", "t", "id", copy) for copy in order]
    return [d for d in found if d is not None]


COPIES = [Copy(100, 1, 7), Copy(100, 2, 3), Copy(250, 0, 9)]  # ordered as copy_number


@pytest.mark.parametrize("order", list(itertools.permutations(COPIES)))
def test_every_copy_but_the_first_is_told_once_in_any_reading_order(order: list[Copy]) -> None:
    told = extras(list(order))
    assert sorted(d.extra for d in told) == COPIES[1:]
    assert all(d.first < d.extra for d in told)
    assert told[-1].first == min(order[: len(told) + 1])


def test_the_same_record_read_again_is_no_duplicate() -> None:
    assert extras([Copy(1, 0, 5), Copy(1, 0, 5)]) == []


def test_ids_are_apart_per_pipeline_and_topic() -> None:
    seen = SeenIds(10)
    assert seen.see("p", "t", "a", Copy(1, 0, 1)) is None
    assert seen.see("q", "t", "a", Copy(1, 0, 2)) is None
    assert seen.see("p", "u", "a", Copy(1, 0, 3)) is None
    assert seen.see("p", "t", "a", Copy(2, 0, 4)) == Duplicate(Copy(1, 0, 1), Copy(2, 0, 4))


def test_past_max_ids_the_id_seen_longest_ago_is_forgotten() -> None:
    seen = SeenIds(2)
    seen.see("p", "t", "a", Copy(1, 0, 1))
    seen.see("p", "t", "b", Copy(1, 0, 2))
    assert seen.see("p", "t", "a", Copy(1, 0, 3)) is not None  # a is now the most recent
    seen.see("p", "t", "c", Copy(1, 0, 4))  # forgets b
    assert len(seen) == 2
    assert seen.see("p", "t", "b", Copy(1, 0, 5)) is None
    assert seen.see("p", "t", "a", Copy(1, 0, 6)) is None  # forgotten when b came back


def test_max_ids_must_hold_one() -> None:
    with pytest.raises(ValueError, match="max_ids"):
        SeenIds(0)
