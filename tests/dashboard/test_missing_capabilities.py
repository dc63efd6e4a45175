"""What the brokers cannot answer, from the collectors' capability events: the published view
keeps the gaps since the newest collector start not restored since (an upgrade restores
them); the overview, `dgm verdicts` and the exporter's verdicts document show them."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dgm.clients.capabilities import (
    CAPABILITY_MISSING,
    CAPABILITY_RESTORED,
    KIP848_GROUPS,
    OPEN_TRANSACTIONS,
    PRODUCERS,
    Gap,
)
from shell.cli import main
from tests.support.dashboard_app import APP, page
from tests.support.published_rows import publish, verdict

OPEN = Gap(OPEN_TRANSACTIONS, "default", "2.8", "has no ListTransactions").line()
GROUPS = Gap(KIP848_GROUPS, "default", "3.6", "has no ConsumerGroupHeartbeat").line()
BEFORE_START = Gap(PRODUCERS, "default", "2.8", "has no DescribeProducers").line()


def fault(now: datetime, seconds_ago: int, event: str, detail: str) -> dict[str, object]:
    return {"at": now - timedelta(seconds=seconds_ago), "event": event, "group_id": None,
            "pipeline": None, "detail": detail}  # fmt: skip


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    now = datetime.now(UTC)
    run = {"run_id": "r1", "started_at": now, "finished_at": now, "last_sample_at": now,
           "records_audited": 0, "fingerprints": 0, "window_s": 60,
           "spark_master": "local[*]"}  # fmt: skip
    publish(
        tmp_path,
        {
            "verdicts": [verdict("payments")],
            "runs": [run],
            "faults": [
                fault(now, 900, CAPABILITY_MISSING, BEFORE_START),  # a collector restarted since
                fault(now, 600, "collector_start", "collector started"),
                fault(now, 590, CAPABILITY_MISSING, OPEN),
                fault(now, 590, CAPABILITY_MISSING, GROUPS),
                fault(now, 300, CAPABILITY_RESTORED, GROUPS),  # the brokers were upgraded
            ],
        },
    )
    (tmp_path / "dgm.toml").write_text(f'state_dir = "{tmp_path}"\n')
    return tmp_path


def test_verdicts_say_what_the_brokers_cannot_answer(
    state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(state_dir / "dgm.toml")
    assert main(["verdicts", "--config", config]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "cannot see open transactions on cluster default: the broker (2.8) has no ListTransactions"
    )
    assert GROUPS not in out and BEFORE_START not in out
    assert main(["verdicts", "--json", "--config", config]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["missing_capabilities"] == [OPEN]
    assert document["missing_permissions"] == []


def test_the_overview_says_what_the_brokers_cannot_answer(
    state_dir: Path, use_state_dir: Callable[[Path], None]
) -> None:
    use_state_dir(state_dir)
    at = page(AppTest.from_file(str(APP), default_timeout=60), "overview")
    shown = [str(w.value) for w in at.warning if "cannot answer everything" in str(w.value)]
    assert shown and OPEN in shown[0]
    assert GROUPS not in shown[0] and BEFORE_START not in shown[0]
    assert not [e for e in at.error if "refused" in str(e.value)]  # no permission is missing
