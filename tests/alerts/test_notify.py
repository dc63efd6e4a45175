from __future__ import annotations

from alerts.notify import link


def test_links_lead_to_the_drill_down_of_what_the_subject_is() -> None:
    base = "http://127.0.0.1:8501/"
    assert link(base, "topic", "a b") == "http://127.0.0.1:8501/topic?topic=a%20b"
    assert link(base, "group", "g") == "http://127.0.0.1:8501/groups?group=g"
    # A pipeline leads to its sink's drill-down when the sink is known, else the overview.
    assert link(base, "pipeline", "p", {"p": "out"}) == "http://127.0.0.1:8501/topic?topic=out"
    assert link(base, "pipeline", "q", {"p": "out"}).startswith("http://127.0.0.1:8501/overview")
    assert link(base, "run", "analysis") == "http://127.0.0.1:8501/overview"
