"""The Alerts page in a real browser (Debian's Chromium via Playwright, `dgm dashboard` served
as in test_browser.py): a rule added with the form fires after the next evaluation, and the
open page shows it without a reload (Screenshot: $DGM_ARTIFACTS/dashboard/alerts.png); with
the default config the form is not there and the page says how to turn it on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api", reason="needs the playwright package")

from playwright.sync_api import expect

from alerts.run import evaluate_after_analysis
from dgm.alerting.store import AlertStore
from dgm.config.loader import load_config
from tests.support.browser import CHROMIUM, WAIT_MS, chromium, serving, wait_cell
from tests.support.published_world.publish import recent_copy

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Debian's Chromium at {CHROMIUM}"),
]


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    directory = Path(os.environ.get("DGM_ARTIFACTS") or tmp_path) / "dashboard"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def test_a_rule_added_in_the_browser_fires_after_the_next_analysis(
    tmp_path: Path, artifacts: Path
) -> None:
    state_dir = tmp_path / "state"
    recent_copy(state_dir)
    with serving(state_dir, refresh_s=2, allow_edits=True) as url, chromium() as page:
        page.goto(f"{url}/alerts", timeout=WAIT_MS)
        page.get_by_text("No alert rules yet", exact=False).wait_for(timeout=WAIT_MS)

        # duplicate_rate is the metric picked by default; payments-ledger's rate is 0.24%.
        page.get_by_label("Name", exact=True).fill("ledger-dups")
        page.get_by_label("Scope", exact=True).fill("topic:payments-ledger")
        page.get_by_label("Threshold", exact=True).fill("0.001")
        page.get_by_label("Threshold", exact=True).press("Tab")
        page.get_by_role("button", name="Add rule").click()
        page.get_by_text("evaluated after the next analysis run", exact=False).wait_for(
            timeout=WAIT_MS
        )
        expect(page.get_by_label("Name", exact=True)).to_have_value("", timeout=WAIT_MS)
        listed = page.get_by_text("duplicate_rate > 0.100% on topic:payments-ledger", exact=False)
        listed.wait_for(timeout=WAIT_MS)
        rules, _ = AlertStore(state_dir).page_rules()
        assert [(r.name, r.metric, r.threshold) for r in rules] == [
            ("ledger-dups", "duplicate_rate", 0.001)
        ]
        assert page.get_by_text("FIRING", exact=True).count() == 0

        # What `dgm analyze` does after its next run; the open page refreshes by itself.
        summary = evaluate_after_analysis(load_config(str(state_dir / "dgm.toml")))
        assert summary.firing == 1, summary.errors
        page.get_by_text("FIRING", exact=True).wait_for(timeout=WAIT_MS)
        page.get_by_text("1 firing", exact=False).wait_for(timeout=WAIT_MS)
        link = page.get_by_role("link", name="topic payments-ledger")
        link.wait_for(timeout=WAIT_MS)
        assert "topic?topic=payments-ledger" in (link.get_attribute("href") or "")
        page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=WAIT_MS)
        page.screenshot(path=artifacts / "alerts.png", full_page=True)

        link.click()  # the alert's link opens the topic's drill-down
        page.get_by_text("3 duplicated ids", exact=False).wait_for(timeout=WAIT_MS)
        assert "topic=payments-ledger" in page.url


def test_an_alert_link_to_a_group_opens_that_group(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    recent_copy(state_dir)
    # orders-enricher is not the page's first group (ledger-auditor is: its HW lag exceeds
    # its LSO lag most), so only the link's ?group= can select it.
    rule = {"name": "enricher-lag", "metric": "consumer_lag_from_lso", "threshold": -1.0}
    added = AlertStore(state_dir).add_rule({**rule, "scope": "group:orders-enricher"})
    assert not isinstance(added, list), added
    with serving(state_dir, refresh_s=2) as url, chromium() as page:
        summary = evaluate_after_analysis(load_config(str(state_dir / "dgm.toml")))
        assert summary.firing == 1, summary.errors
        page.goto(f"{url}/alerts", timeout=WAIT_MS)
        link = page.get_by_role("link", name="group orders-enricher")
        link.wait_for(timeout=WAIT_MS)
        link.click()
        page.get_by_text("State at the newest sample", exact=False).wait_for(timeout=WAIT_MS)
        assert "group=orders-enricher" in page.url
        expect(page.get_by_role("combobox", name="Group")).to_have_value(
            "orders-enricher", timeout=WAIT_MS
        )


def test_by_default_rules_are_read_only_and_the_page_says_how_to_edit(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    recent_copy(state_dir)
    added = AlertStore(state_dir).add_rule(
        {
            "name": "ledger-dups",
            "metric": "duplicate_rate",
            "scope": "topic:payments-ledger",
            "threshold": 0.001,
        }
    )
    assert not isinstance(added, list), added
    with serving(state_dir) as url, chromium() as page:
        page.goto(f"{url}/alerts", timeout=WAIT_MS)
        page.get_by_text("allow_edits = true", exact=False).wait_for(timeout=WAIT_MS)
        wait_cell(page, "ledger-dups")  # listed in the page rules' table
        page.wait_for_selector('[data-testid="stStatusWidget"]', state="detached", timeout=WAIT_MS)
        assert page.get_by_role("button", name="Add rule").count() == 0
        assert page.get_by_role("button", name="Delete").count() == 0
        assert page.get_by_label("Threshold", exact=True).count() == 0
