"""`dgm demo` as a user runs it: one command, a dashboard that answers, every demo pipeline
published with the verdict its mode produces, its alert rules firing on the broken
exactly-once pipeline and delivered to the demo's own receiver, and Ctrl-C leaving nothing
behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dgm.alerting.store import AlertStore
from dgm.util.errors import UserFacingError
from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until
from shell.demo_command import prepare_state_dir
from shell.stack import dashboard_answers
from tests.support.dgm_processes import clean_env, processes_of, published_verdicts

# What each lab mode's pipeline must be judged (tests/scenarios/test_lab_verdicts.py).
EXPECTED = {
    "demo-at-most-once": "at-most-once",
    "demo-at-least-once": "at-least-once",
    "demo-exactly-once": "exactly-once",
    "demo-exactly-once-broken": "no guarantee",
    "demo-idempotent-sink": "exactly-once",
}
BROKEN = "demo-exactly-once-broken"
DEMO_ALERTS = ("aborted-reads", "verdict-violated")  # shell/demo_command.py's rules
DEMO = (sys.executable, "-m", "shell.cli", "demo")
DASHBOARD_TIMEOUT = 240.0  # a cold Kafka and Streamlit on a busy machine
VERDICTS_TIMEOUT = 1200.0  # the first analysis starts Spark; a run takes minutes here


def achieved(state_dir: Path) -> dict[str, str]:
    return {name: row["achieved"] for name, row in published_verdicts(state_dir).items()}


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(1800)  # one analysis run alone takes minutes on a busy 2-core machine
def test_dgm_demo_shows_every_verdict_and_stops_cleanly(tmp_path: Path) -> None:
    state_dir = tmp_path / "demo-state"
    port, exporter_port = free_ports(2)
    url = f"http://127.0.0.1:{port}"
    output = tmp_path / "demo.out"
    began = time.monotonic()
    with output.open("w") as out:
        demo = subprocess.Popen(
            [
                *DEMO,
                "--state-dir",
                str(state_dir),
                "--port",
                str(port),
                "--exporter-port",
                str(exporter_port),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env=clean_env(),
        )

    def alive() -> bool:
        assert demo.poll() is None, f"dgm demo exited:\n{output.read_text()[-3000:]}"
        return False

    try:
        wait_until(lambda: alive() or dashboard_answers(url), DASHBOARD_TIMEOUT, "the dashboard")
        dashboard_s = time.monotonic() - began
        seen: dict[str, str] = {}

        def all_judged() -> bool:
            alive()
            seen.update(achieved(state_dir))
            return all(seen.get(name) == verdict for name, verdict in EXPECTED.items())

        try:
            wait_until(all_judged, VERDICTS_TIMEOUT, "every expected verdict", interval=1)
        except AssertionError as error:
            raise AssertionError(f"{error}; published: {seen}") from None
        verdicts_s = time.monotonic() - began
        rows = published_verdicts(state_dir)
        assert rows["demo-drop-acks"]["declared"] == "at-least-once"
        store = AlertStore(state_dir)

        def alerted() -> set[str]:
            return {
                r.body["rule"]
                for r in store.received()
                if r.body.get("subject") == BROKEN and r.body.get("state") == "firing"
            }

        # Evaluated and delivered right after the publication that judged the pipeline.
        wait_until(lambda: alerted() == set(DEMO_ALERTS), 180, f"{DEMO_ALERTS} at the receiver")
        alerts_s = time.monotonic() - began
        print(
            f"dashboard after {dashboard_s:.0f}s, every verdict after {verdicts_s:.0f}s, "
            f"both alerts at the receiver after {alerts_s:.0f}s"
        )
    finally:
        if demo.poll() is None:
            demo.send_signal(signal.SIGINT)
        try:
            returncode = demo.wait(180)
        except subprocess.TimeoutExpired:
            demo.kill()
            raise
    text = output.read_text()
    assert returncode == 0, text[-3000:]
    assert f"dashboard: {url}" in text
    assert f"Prometheus metrics at http://127.0.0.1:{exporter_port}/metrics" in text
    assert "receiver at http://127.0.0.1:" in text
    assert "demo stopped" in text
    # Nothing of this run is left: no broker, no services (Streamlit, Spark), no processor.
    wait_until(lambda: not processes_of(str(state_dir)), 30, "no process of the demo left")


def test_a_folder_that_is_not_the_demos_is_refused(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("mine")
    with pytest.raises(UserFacingError, match="not a dgm demo folder"):
        prepare_state_dir(tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "mine"


def test_a_previous_demo_folder_is_emptied(tmp_path: Path) -> None:
    prepare_state_dir(tmp_path / "demo")
    (tmp_path / "demo" / "samples").mkdir()
    (tmp_path / "demo" / "dgm.duckdb").write_text("old")
    prepare_state_dir(tmp_path / "demo")
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == [".dgm-demo"]


def test_a_taken_port_is_one_clear_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*DEMO, "--state-dir", str(tmp_path / "s"), "--port", str(port)],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=60,
            check=False,
        )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"dgm: error: port {port} on 127.0.0.1 is taken: stop what uses it, or pass --port"
    ]
    assert not (tmp_path / "s").exists(), "nothing is started before the checks pass"
