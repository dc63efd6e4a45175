"""The overview's queries: one row per pipeline (verdict, rates, LSO lag, since when the
verdict holds, group status) and each pipeline's verdict history, filtered in DuckDB."""

from __future__ import annotations

import pandas as pd

from dashboard.queries import WITHIN, at_newest_sample, read, read_within
from dashboard.timerange import TimeRange
from dgm.contracts.published import TABLES
from dgm.contracts.vocabulary import Achieved, Claim

NOT_JUDGED = Achieved.INSUFFICIENT_EVIDENCE.value

# The newest judged window's verdict and the start of the earliest window since which every
# judged window has had it (windows of insufficient evidence judge nothing and are skipped).
_SINCE = f"""
judged AS (SELECT pipeline, window_start, achieved FROM pipeline_windows
  WHERE achieved IS NOT NULL AND achieved <> '{NOT_JUDGED}'),
newest AS (SELECT pipeline, arg_max(achieved, window_start) AS held FROM judged GROUP BY pipeline),
broke AS (SELECT pipeline, max(window_start) AS at FROM judged JOIN newest USING (pipeline)
  WHERE achieved <> held GROUP BY pipeline),
since AS (SELECT pipeline, any_value(held) AS window_verdict, min(window_start) AS holds_since
  FROM judged JOIN newest USING (pipeline) LEFT JOIN broke USING (pipeline)
  WHERE broke.at IS NULL OR window_start > broke.at GROUP BY pipeline)"""

_LSO = f"""
newest_offsets AS (SELECT topic, max(lso_lag) AS lso_lag FROM partition_offsets
  WHERE {at_newest_sample("partition_offsets")} GROUP BY topic),
pipeline_topics AS (SELECT pipeline, unnest(list_concat(source_topics, sink)) AS topic
  FROM verdicts),
lso AS (SELECT pipeline, max(lso_lag) AS lso_lag FROM pipeline_topics
  JOIN newest_offsets USING (topic) GROUP BY pipeline),
commits AS (SELECT group_id, count(committed_offset) AS group_commits FROM group_lag
  GROUP BY group_id)"""


def has_group_status() -> bool:
    """Whether the publication contract has the consumer-group status table."""
    return any(t.name == "group_status" for t in TABLES)


def _group_status() -> tuple[str, str]:
    """(CTE, column) adding each group's status (its own row, group_status_by_group), when
    the contract has the consumer-group status table."""
    if not has_group_status():
        return "", "NULL::VARCHAR AS group_status, NULL::DOUBLE AS consumer_lag_s"
    cte = (
        ",\ngroups AS (SELECT group_id, any_value(status) AS group_status, "
        "max(lag_s_end) AS consumer_lag_s FROM group_status_by_group GROUP BY group_id)"
    )
    return cte, "groups.group_status, groups.consumer_lag_s"


# The sink's extra copies per cause, most first: "reprocessing 83, producer retry 2".
_CAUSES = """causes AS (SELECT pipeline,
    string_agg(cause || ' ' || copies, ', ' ORDER BY copies DESC, cause) AS duplicate_causes
  FROM (SELECT pipeline, cause, count(*) AS copies FROM duplicates
    WHERE is_extra_copy AND pipeline IS NOT NULL GROUP BY ALL) GROUP BY pipeline)"""


def overview(text: str = "", violating_only: bool = False) -> pd.DataFrame:
    """Every pipeline: violating first (then unjudged, then meeting), then by name.

    `text` keeps pipelines whose name, topics or group contain it (case-insensitive);
    `violating_only` keeps those whose verdict does not meet the declared semantic."""
    cte, status = _group_status()
    join = "LEFT JOIN groups ON groups.group_id = v.consumer_group" if cte else ""
    return read(
        f"""WITH {_SINCE}, {_LSO}{cte}, {_CAUSES}
        SELECT v.*, lso.lso_lag, since.window_verdict, since.holds_since, causes.duplicate_causes,
          coalesce(commits.group_commits, 0) AS group_commits, {status},
          stages.producer_achieved, stages.producer_duplicate_rate,
          stages.producer_sequence_gaps, stages.end_to_end_achieved, stages.chain
        FROM verdicts v LEFT JOIN since USING (pipeline) LEFT JOIN lso USING (pipeline)
        LEFT JOIN pipeline_stages stages USING (pipeline) LEFT JOIN causes USING (pipeline)
        LEFT JOIN commits ON commits.group_id = v.consumer_group {join}
        WHERE ($text = '' OR contains(lower(concat_ws(' ', v.pipeline, v.consumer_group,
            array_to_string(v.source_topics, ' '), array_to_string(v.sink, ' '))), lower($text)))
          AND (NOT $violating OR v.meets_declared = false)
        ORDER BY CASE WHEN v.meets_declared = false THEN 0 WHEN v.meets_declared IS NULL THEN 1
          ELSE 2 END, v.pipeline""",
        text=text,
        violating=violating_only,
    )


def verdict_segments(within: TimeRange | None = None) -> pd.DataFrame:
    """Per pipeline, the runs of consecutive windows with the same verdict in the range:
    (pipeline, achieved, start, finish, windows); a new row is a change of verdict."""
    return read_within(
        f"""WITH w AS (SELECT pipeline, window_start,
            coalesce(achieved, '{NOT_JUDGED}') AS achieved,
            lag(coalesce(achieved, '{NOT_JUDGED}'))
              OVER (PARTITION BY pipeline ORDER BY window_start) AS before
          FROM pipeline_windows WHERE {WITHIN}),
        s AS (SELECT *, sum(CASE WHEN before = achieved THEN 0 ELSE 1 END)
            OVER (PARTITION BY pipeline ORDER BY window_start) AS segment FROM w)
        SELECT pipeline, any_value(achieved) AS achieved, min(window_start) AS start,
          max(window_start) + to_seconds(coalesce((SELECT max(window_s) FROM runs), 60))
            AS finish,
          count(*) AS windows
        FROM s GROUP BY pipeline, segment ORDER BY pipeline, start""",
        "window_start",
        within,
    )


def why_not_judged(row: pd.Series, grace_s: float, min_records: int) -> str:
    """Why a pipeline's counts are not (all) judged, or "" when they are."""
    reasons = [_why_nothing_judged(row, grace_s, min_records)]
    beyond = row.get("beyond_retention")
    if beyond is not None and not pd.isna(beyond) and int(beyond) > 0:
        reasons.append(
            f"{int(beyond):,} source records missing from the sink are older than the oldest "
            "sink record dgm holds: their copies may have been deleted by retention, so they "
            "are beyond retention, neither lost nor checked"
        )
    return "; ".join(r for r in reasons if r)


def _why_nothing_judged(row: pd.Series, grace_s: float, min_records: int) -> str:
    checked = row.get("records_checked")
    checked = 0 if checked is None or pd.isna(checked) else int(checked)
    group = row.get("consumer_group")
    if checked == 0 and row.get("claim") == Claim.DEADLINE:
        return (
            f"pending deadline: every source record is younger than its {row.get('claim_detail')} "
            "(its sink copy may still come in time)"
        )
    if checked == 0:
        if not row.get("group_commits"):
            return (
                f"no commit of group {group} sampled yet: no record is below a committed "
                "offset, so no record's fate is known"
            )
        return (
            f"pending grace: the records below {group}'s committed offset are younger than "
            f"grace_s = {grace_s:g} s (their sink copy may not be visible yet)"
        )
    if row.get("achieved") == NOT_JUDGED and checked < min_records:
        return f"only {checked} records checked, fewer than min_records = {min_records}"
    return ""
