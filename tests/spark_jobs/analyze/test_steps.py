"""A pass run beside the caller's (steps.Beside) behind the caller's jobs: its work starts
once the caller has submitted a Spark job, so the caller's jobs come first in Spark's FIFO
order (engine._rebuilt: the per-id pass before the stream pass)."""

from __future__ import annotations

from typing import Any

from spark_jobs.analyze.steps import Beside, Timings


def test_the_work_beside_starts_after_the_callers_first_job(spark: Any) -> None:
    context = spark.sparkContext
    tracker = context.statusTracker()
    group = "beside-behind-the-caller"
    context.setJobGroup(group, group)
    try:
        found_at_start: list[set[int]] = []

        def work() -> int:
            found_at_start.append(set(tracker.getJobIdsForGroup(group)))
            return int(spark.range(1000).count())

        timings: Timings = {}
        beside = Beside(work, timings, "beside", behind=context)
        callers = spark.range(500).count()
        assert (beside.result(), callers) == (1000, 500)
        # The caller's job existed when the work began: its own came after it.
        assert found_at_start[0], "the work began before the caller submitted a job"
        assert set(timings) == {"beside"}
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
