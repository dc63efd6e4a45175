"""The sentences of a pipeline's card that read published figures."""

from __future__ import annotations

import pandas as pd

from dashboard.panels.pipeline_sentences import stages


def _stage_row(gaps: object) -> pd.Series:
    return pd.Series(
        {
            "pipeline": "copy",
            "producer_achieved": "exactly-once",
            "producer_duplicate_rate": 0.0,
            "producer_sequence_gaps": gaps,
            "end_to_end_achieved": "at-least-once",
            "chain": ["copy"],
        }
    )


def test_the_producer_stage_counts_gaps_only_where_sequences_were_read() -> None:
    said = stages(_stage_row(3))
    assert said is not None and "3 records missing from its producers' sequences" in said
    unmeasured = stages(_stage_row(None))
    assert unmeasured is not None
    assert "losses not measured" in unmeasured and "missing from" not in unmeasured
