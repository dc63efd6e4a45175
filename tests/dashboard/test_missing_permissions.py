"""What dgm may not see, from the collectors' refusal events: the published view keeps the
refusals since the newest collector start not restored since; the overview and `dgm verdicts`
show them."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dgm.clients.permissions import (
    AUTHORIZATION_FAILED,
    AUTHORIZATION_RESTORED,
    GROUP_DESCRIBE,
    TOPIC_READ,
    Denial,
)
from shell.cli import main
from tests.support.dashboard_app import APP, page
from tests.support.published_rows import publish, verdict

GROUP = Denial(GROUP_DESCRIBE, "payments-app").line()
TOPIC = Denial(TOPIC_READ, "orders").line()
BEFORE_START = Denial(TOPIC_READ, "old").line()


def fault(
    now: datetime, seconds_ago: int, event: str, detail: str, pipeline: str | None = None
) -> dict[str, object]:
    return {"at": now - timedelta(seconds=seconds_ago), "event": event, "group_id": None,
            "pipeline": pipeline, "detail": detail}  # fmt: skip


def run(now: datetime) -> dict[str, object]:
    return {"run_id": "r1", "started_at": now, "finished_at": now, "last_sample_at": now,
            "records_audited": 0, "fingerprints": 0, "window_s": 60,
            "spark_master": "local[*]"}  # fmt: skip


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    now = datetime.now(UTC)
    publish(
        tmp_path,
        {
            "verdicts": [verdict("payments")],
            "runs": [run(now)],
            "faults": [
                fault(now, 900, AUTHORIZATION_FAILED, BEFORE_START),  # a collector restarted since
                fault(now, 600, "collector_start", "collector started"),
                fault(now, 590, AUTHORIZATION_FAILED, GROUP, "payments"),
                fault(now, 590, AUTHORIZATION_FAILED, TOPIC, "payments"),
                fault(now, 300, AUTHORIZATION_RESTORED, TOPIC, "payments"),  # granted since
            ],
        },
    )
    (tmp_path / "dgm.toml").write_text(f'state_dir = "{tmp_path}"\n')
    return tmp_path


def test_verdicts_say_what_dgm_cannot_see(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(state_dir / "dgm.toml")
    assert main(["verdicts", "--config", config]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "cannot see group payments-app: missing permission Describe on group payments-app"
    )
    assert TOPIC not in out and BEFORE_START not in out
    assert main(["verdicts", "--json", "--config", config]) == 0
    assert json.loads(capsys.readouterr().out)["missing_permissions"] == [GROUP]


def test_the_overview_says_what_dgm_cannot_see(
    state_dir: Path, use_state_dir: Callable[[Path], None]
) -> None:
    use_state_dir(state_dir)
    at = page(AppTest.from_file(str(APP), default_timeout=60), "overview")
    errors = [str(e.value) for e in at.error]
    shown = [e for e in errors if "refused what it needs to see" in e]
    assert shown and GROUP in shown[0] and "(pipelines: payments)" in shown[0]
    assert TOPIC not in shown[0] and BEFORE_START not in shown[0]
