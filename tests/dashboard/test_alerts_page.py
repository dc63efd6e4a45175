"""The Alerts page (AppTest): the rule form stores valid rules only, and what an evaluation
after an analysis run wrote (states, history, failed webhook deliveries) is shown; without
`[dashboard] allow_edits = true` there is no form, rules are read-only and the page says how
to turn it on."""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from alerts.run import evaluate_after_analysis
from dashboard import ui
from dgm.alerting.store import STORE_FILE, AlertStore
from dgm.config.document import DgmConfig
from dgm.config.loader import load_config
from tests.support.dashboard_app import APP, healthy, markdown, no_exception, page, write_config
from tests.support.published_world.publish import Expected, recent_copy

# payments-ledger: 4 extra copies over 10 windows of 167 records (tests/support/published_world/)
LEDGER_RATE = 4 / (1670 - 4)


@pytest.fixture
def state(tmp_path: Path, use_state_dir: Callable[..., None]) -> Expected:
    """A published analysis in a state directory of this test's own (alerts.sqlite too), the
    rule form on."""
    expected = recent_copy(tmp_path)
    use_state_dir(tmp_path, allow_edits=True)
    return expected


def config_of(state_dir: Path) -> DgmConfig:
    return load_config(str(state_dir / "dgm.toml"))


def open_alerts() -> AppTest:
    at = page(AppTest.from_file(str(APP), default_timeout=60), "alerts")
    healthy(at)
    return at


def submit(at: AppTest, *, replace: bool = False, **values: str) -> AppTest:
    """Fill the rule form (text fields typed, choices picked) and press Add rule."""
    return submit_values(at, values, replace=replace)


def submit_values(at: AppTest, values: Mapping[str, str], *, replace: bool = False) -> AppTest:
    for field, value in values.items():
        key = f"alert-{field}"
        if field in ("name", "scope", "threshold"):
            at.text_input(key=key).input(value)
        elif field in ("for_s", "renotify_s"):
            at.number_input(key=key).set_value(float(value))
        else:
            at.selectbox(key=key).select(value)
    if replace:
        at.checkbox(key="alert-replace").check()
    next(b for b in at.button if b.label == "Add rule").click().run()
    no_exception(at)
    return at


def errors(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in at.error)


def successes(at: AppTest) -> str:
    return "\n".join(str(s.value) for s in at.success)


def page_links(at: AppTest) -> list[tuple[str, str, str]]:
    """(label, page, query string) of every page link on the page."""
    return [
        (link.proto.label, link.proto.page, link.proto.query_string) for link in at.get("page_link")
    ]


def frame_titled(at: AppTest, *columns: str) -> list[dict[str, object]]:
    """The rows of the first table having these columns."""
    for table in at.dataframe:
        frame = table.value
        if set(columns) <= set(frame.columns):
            return list(frame.to_dict("records"))
    raise AssertionError(f"no table with columns {columns}")


def test_no_rules_explains_how_to_add_one(state: Expected, tmp_path: Path) -> None:
    at = open_alerts()
    info = " ".join(str(i.value) for i in at.info)
    assert "No alert rules yet" in info and "form" in info and "[[alerts]]" in info
    assert any("[[alerts]]" in str(c.value) and "threshold" in str(c.value) for c in at.code)
    assert not (tmp_path / STORE_FILE).exists()  # looking at the page stores nothing


@pytest.mark.parametrize(
    ("values", "field", "says"),
    [
        ({"threshold": "lots"}, "threshold", "expected a number, got 'lots'"),
        ({"threshold": "0.01", "scope": "orders-[a"}, "scope", "balanced [...]"),
        ({"threshold": "0.01", "scope": "group:*"}, "scope", "measured per pipeline or topic"),
        ({"threshold": "0.01", "name": ""}, "name", "expected a name"),
    ],
)
def test_an_invalid_rule_names_the_field_and_stores_nothing(
    state: Expected, tmp_path: Path, values: dict[str, str], field: str, says: str
) -> None:
    at = submit_values(open_alerts(), {"name": "dups", **values})
    problems = errors(at)
    assert "not stored" in problems and f"**{field}**" in problems and says in problems
    assert not at.exception
    store = AlertStore(tmp_path)
    assert store.page_rules() == ([], [])


def test_a_duplicate_name_is_refused(state: Expected, tmp_path: Path) -> None:
    at = submit(open_alerts(), name="dups", threshold="0.01")
    assert "`dups` is stored" in successes(at)
    at = submit(at, name="dups", threshold="0.5")
    assert "**name**" in errors(at) and "a page rule of this name exists" in errors(at)
    rules, _ = AlertStore(tmp_path).page_rules()
    assert [(r.name, r.threshold) for r in rules] == [("dups", 0.01)]


def test_a_name_dgm_toml_uses_is_refused(
    state: Expected, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, allow_edits=True)
    config.write_text(
        config.read_text()
        + "[[alerts]]\nname = 'lag'\nmetric = 'consumer_lag_from_lso'\nthreshold = 1000\n"
    )
    at = submit(open_alerts(), name="lag", threshold="5")
    assert "**name**" in errors(at) and "dgm.toml already declares" in errors(at)
    assert "Read-only here" in " ".join(str(c.value) for c in at.caption)
    assert frame_titled(at, "name", "fires when")[0]["name"] == "lag"
    assert not [b for b in at.button if b.label == "Delete"]  # a file rule is not deletable
    assert AlertStore(tmp_path).page_rules() == ([], [])


def test_a_valid_rule_fires_after_the_next_analysis_and_links_its_topic(
    state: Expected, tmp_path: Path
) -> None:
    at = submit(
        open_alerts(),
        name="ledger-dups",
        metric="duplicate_rate",
        scope="topic:payments-ledger",
        threshold="0.001",
        severity="critical",
    )
    assert "evaluated after the next analysis run" in successes(at)
    assert at.text_input(key="alert-name").value == ""  # a fresh form
    assert [r["name"] for r in frame_titled(at, "name", "fires when")] == ["ledger-dups"]
    rules, _ = AlertStore(tmp_path).page_rules()  # durable: a new connection reads it
    assert rules[0].severity == "critical" and rules[0].threshold == 0.001

    summary = evaluate_after_analysis(config_of(tmp_path), now=state.now)
    assert summary.firing == 1 and not summary.errors
    at = open_alerts()
    text = "\n".join(markdown(at))
    assert "**1 firing**, 0 pending" in text
    card = next(t for t in markdown(at) if "FIRING" in t)
    assert "`ledger-dups`" in card and "`payments-ledger`" in card and "critical" in card
    assert f"value **{ui.rate(LEDGER_RATE)}**" in card and "fires when > 0.100%" in card
    assert ("topic payments-ledger", "topic", "topic=payments-ledger") in page_links(at)


def test_a_pipeline_alert_links_its_sink_topic(state: Expected, tmp_path: Path) -> None:
    submit(open_alerts(), name="losing", metric="loss_rate", threshold="0")
    evaluate_after_analysis(config_of(tmp_path), now=state.now)
    at = open_alerts()
    assert any("`payments-eos`" in t and "FIRING" in t for t in markdown(at))
    assert ("sink payments-ledger", "topic", "topic=payments-ledger") in page_links(at)


def test_history_shows_the_firing_then_the_resolution(state: Expected, tmp_path: Path) -> None:
    at = submit(open_alerts(), name="dups", scope="topic:payments-ledger", threshold="0.001")
    evaluate_after_analysis(config_of(tmp_path), now=state.now)
    at = submit(open_alerts(), replace=True, name="dups", threshold="0.5")
    assert "`dups` is stored" in successes(at)
    evaluate_after_analysis(config_of(tmp_path), now=state.now + timedelta(minutes=1))
    at = open_alerts()
    assert any("Nothing is firing" in str(s.value) for s in at.success)
    history = frame_titled(at, "state", "fires when")
    assert [(h["state"], h["rule"], h["subject"]) for h in history] == [
        ("resolved", "dups", "payments-ledger"),
        ("firing", "dups", "payments-ledger"),
    ]
    assert history[0]["fires when"] == "> 50.00%" and history[1]["fires when"] == "> 0.100%"
    assert history[1]["value"] == ui.rate(LEDGER_RATE)
    assert pd.Timestamp(history[0]["at"]) > pd.Timestamp(history[1]["at"])


def test_a_failed_webhook_delivery_is_listed_with_its_error(
    state: Expected, tmp_path: Path
) -> None:
    with socket.socket() as closed:  # a port nothing listens on once the socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    config = write_config(tmp_path, allow_edits=True)
    config.write_text(config.read_text() + f"[alerts_webhook]\nurl = 'http://127.0.0.1:{port}/h'\n")
    submit(open_alerts(), name="dups", scope="topic:payments-ledger", threshold="0.001")
    summary = evaluate_after_analysis(config_of(tmp_path), now=state.now)
    assert summary.delivery_failures == 1
    at = open_alerts()
    assert "1 webhook notification(s) failed" in errors(at)
    assert f"127.0.0.1:{port}" in errors(at)
    [row] = frame_titled(at, "status", "error", "attempts")
    assert row["status"] == "waiting for retry" and row["attempts"] == 3
    assert f"127.0.0.1:{port}" in str(row["error"]) and "refused" in str(row["error"]).lower()
    assert row["notification"] == "firing: dups / payments-ledger"


def test_a_page_rule_can_be_deleted(state: Expected, tmp_path: Path) -> None:
    at = submit(open_alerts(), name="dups", threshold="0.001")
    delete = next(b for b in at.button if b.label == "Delete")
    delete.click().run()
    healthy(at)
    assert "Deleted rule `dups`" in successes(at)
    assert AlertStore(tmp_path).page_rules() == ([], [])
    assert any("No alert rules yet" in str(i.value) for i in at.info)


def test_no_analysis_yet_still_takes_rules(
    tmp_path: Path, use_state_dir: Callable[..., None]
) -> None:
    use_state_dir(tmp_path, allow_edits=True)
    at = open_alerts()
    assert any("No analysis published yet" in str(i.value) for i in at.info)
    at = submit(at, name="dups", threshold="0.001")
    assert "`dups` is stored" in successes(at)


def test_a_rule_holding_less_than_for_s_is_pending(state: Expected, tmp_path: Path) -> None:
    submit(open_alerts(), name="slow", scope="topic:payments-ledger", threshold="0", for_s="600")
    evaluate_after_analysis(config_of(tmp_path), now=state.now)
    at = open_alerts()
    assert "**0 firing**, 1 pending" in markdown(at)
    card = next(t for t in markdown(at) if "PENDING" in t)
    assert "`slow`" in card and "fires after 600 s" in card


def test_an_unreadable_alerts_file_is_a_message_with_retry(state: Expected, tmp_path: Path) -> None:
    (tmp_path / STORE_FILE).write_bytes(b"not sqlite" * 1000)
    at = page(AppTest.from_file(str(APP), default_timeout=60), "alerts")
    no_exception(at)
    assert "cannot be read" in errors(at)
    assert "Retry" in [b.label for b in at.button]
    at = submit(at, name="dups", threshold="0.001")
    assert "not stored" in errors(at)


# --- edits off (the default) ----------------------------------------------------------------


def test_by_default_there_is_no_form_and_the_page_says_how_to_turn_it_on(
    tmp_path: Path, use_state_dir: Callable[..., None]
) -> None:
    recent_copy(tmp_path)
    use_state_dir(tmp_path)  # no [dashboard] table: edits off
    AlertStore(tmp_path).add_rule({"name": "dups", "metric": "duplicate_rate", "threshold": 0.01})
    at = open_alerts()
    assert not [b for b in at.button if b.label in ("Add rule", "Delete")]
    assert not [t for t in at.text_input if t.key and t.key.startswith("alert-")]
    info = " ".join(str(i.value) for i in at.info)
    assert "allow_edits = true" in info and "[dashboard]" in info
    assert str(tmp_path / "dgm.toml") in info and "authentication" in info
    rules = frame_titled(at, "name", "fires when")
    assert [r["name"] for r in rules] == ["dups"]  # listed, read-only
    assert AlertStore(tmp_path).page_rules()[0][0].name == "dups"


def test_by_default_no_rules_says_to_declare_them_in_dgm_toml(
    tmp_path: Path, use_state_dir: Callable[..., None]
) -> None:
    recent_copy(tmp_path)
    use_state_dir(tmp_path)
    at = open_alerts()
    (empty,) = [str(i.value) for i in at.info if "No alert rules yet" in str(i.value)]
    assert "[[alerts]]" in empty and "form" not in empty
    assert not (tmp_path / STORE_FILE).exists()


def test_a_form_left_open_after_edits_were_turned_off_stores_nothing(
    state: Expected, tmp_path: Path
) -> None:
    at = open_alerts()  # edits on: the form is there
    write_config(tmp_path)  # then turned off in dgm.toml, the page not reloaded
    at = submit(at, name="dups", threshold="0.01")
    assert "not stored" in errors(at) and "allow_edits" in errors(at)
    assert AlertStore(tmp_path).page_rules() == ([], [])
