"""Id-hash sampling's arithmetic: the hash bounds nest, the Wilson interval, conflicts."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dgm.config.problems import ConfigError
from dgm.contracts.sampling import kept_below, rate_interval, wilson_interval
from tests.support.config_text import load_text


def test_bounds_nest_and_split_the_hash_space_by_the_share() -> None:
    assert kept_below(1) == 2**63
    assert kept_below(100) < kept_below(10) < kept_below(1)
    assert kept_below(10) == 2**63 // 10
    with pytest.raises(ValueError, match="N >= 1"):
        kept_below(0)


def test_wilson_interval_known_values() -> None:
    # No hit in 100 trials: the bound a rate could still reach is about 3.7%.
    low, high = wilson_interval(0, 100) or (math.nan, math.nan)
    assert low == 0.0 and high == pytest.approx(0.0370, abs=1e-4)
    low, high = wilson_interval(10, 100) or (math.nan, math.nan)
    assert low == pytest.approx(0.0552, abs=1e-4) and high == pytest.approx(0.1744, abs=1e-4)
    assert wilson_interval(0, 0) is None


@given(st.integers(0, 10_000), st.integers(1, 10_000))
def test_the_interval_holds_the_rate_and_stays_within_0_and_1(hits: int, trials: int) -> None:
    hits = min(hits, trials)
    low, high = wilson_interval(hits, trials) or (math.nan, math.nan)
    assert 0.0 <= low <= hits / trials <= high <= 1.0


def test_an_exact_count_is_its_own_interval_and_a_rate_above_one_has_none() -> None:
    assert rate_interval(3, 200, 1) == (0.015, 0.015)
    assert rate_interval(3, 0, 10) == (None, None)
    assert rate_interval(300, 200, 10) == (None, None)
    low, high = rate_interval(3, 200, 10)
    assert low is not None and high is not None and low < 0.015 < high


PIPELINE = """
[[pipelines]]
name = "{name}"
source_topics = ["{source}"]
sink_topics = ["{sink}"]
consumer_group = "{name}"
declared_semantic = "at-least-once"
{extra}
"""


def test_pipelines_sharing_a_topic_must_sample_it_alike(tmp_path: Path) -> None:
    text = (
        "[analysis]\nsample_one_in = 10\n"
        + PIPELINE.format(name="a", source="in", sink="mid", extra="")
        + PIPELINE.format(name="b", source="mid", sink="out", extra="sample_one_in = 100")
    )
    with pytest.raises(ConfigError, match=r"pipelines\[1\]\.sample_one_in: topic 'mid'"):
        load_text(tmp_path, text)
    same = text.replace("sample_one_in = 100", "sample_one_in = 10")
    config = load_text(tmp_path, same)
    assert config.topic_one_in() == {"in": 10, "mid": 10, "out": 10}


def test_a_share_below_one_names_its_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"pipelines\[0\]\.sample_one_in: expected 1 or more"):
        load_text(
            tmp_path, PIPELINE.format(name="a", source="i", sink="o", extra="sample_one_in = 0")
        )
