"""shell.services with tiny real child processes: restart on a crash, a clean stop, nothing left."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dgm.util.waiting import wait_until
from embedded_kafka.processes import is_alive
from shell.services import ServiceGroup, ServiceSpec, dgm_command

SLEEPER = "import time, sys; print('up', flush=True); time.sleep(600)"


def said(path: Path, word: str) -> int:
    """How many lines of a child's log are exactly `word` (the log also echoes commands)."""
    return path.read_text().splitlines().count(word) if path.exists() else 0


def python(code: str, marker: str) -> list[str]:
    # The marker (a tmp path) makes these children findable in /proc, and only these.
    return [sys.executable, "-c", code, marker]


def test_restarts_a_child_that_dies_and_says_so(tmp_path: Path) -> None:
    lines: list[str] = []
    marker = str(tmp_path / "crasher")
    group = ServiceGroup(tmp_path / "logs", lines.append, poll_s=0.05)
    with group:
        first = group.start(ServiceSpec("crasher", python(SLEEPER, marker)))
        wait_until(lambda: said(group.log_path("crasher"), "up"), 20, "first start")
        os.kill(first, 9)
        second = wait_until(
            lambda: group.pids().get("crasher") not in (None, first) and group.pids()["crasher"],
            20,
            "a restart",
        )
        assert second != first
        assert [r.name for r in group.restarts] == ["crasher"]
        assert group.restarts[0].returncode == -9
        assert any("crasher" in line and "restarting in 1s" in line for line in lines), lines
        wait_until(lambda: said(group.log_path("crasher"), "up") == 2, 20, "second start")
    assert not is_alive(second, marker)
    assert not is_alive(first, marker)


def test_a_childs_output_rotates_at_the_bound_and_keeps_only_the_backups(tmp_path: Path) -> None:
    """What `dgm run` does with its services' output: <log_dir>/<name>.log, rotated."""
    bound, lines = 64 * 1024, 20_000  # ~660 KB of output: ten times the bound
    chatty = (
        "import sys, time\n"
        f"for n in range({lines}): print(f'line {{n:06d}} ' + 'x' * 20)\n"
        "print('said it all', flush=True)\n"
        "print('on stderr too', file=sys.stderr, flush=True)\n"
        "time.sleep(600)\n"
    )
    group = ServiceGroup(tmp_path / "logs", lambda line: None, log_max_bytes=bound, log_backups=2)
    with group:
        group.start(ServiceSpec("chatty", python(chatty, str(tmp_path / "chatty"))))
        log = group.log_path("chatty")
        wait_until(lambda: said(log, "on stderr too"), 60, "the child's last line")
    files = [log.with_name("chatty.log.2"), log.with_name("chatty.log.1"), log]
    assert sorted(p.name for p in log.parent.iterdir()) == sorted(p.name for p in files)
    assert all(0 < p.stat().st_size <= bound for p in files)
    text = [line for p in files for line in p.read_text().splitlines()]
    numbers = [int(line.split()[1]) for line in text if line.startswith("line ")]
    assert numbers == list(range(numbers[0], lines)), "lines lost or cut within the kept files"
    assert numbers[0] > 0 and text[-2:] == ["said it all", "on stderr too"]
    assert not any(line.startswith("--- ") for line in text)  # the start line was rotated away


def test_backoff_grows_for_a_child_that_keeps_failing(tmp_path: Path) -> None:
    group = ServiceGroup(tmp_path / "logs", lambda line: None, poll_s=0.05)
    with group:
        group.start(ServiceSpec("failing", [sys.executable, "-c", "raise SystemExit(3)"]))
        wait_until(lambda: len(group.restarts) >= 3, 30, "three restarts")
    delays = [r.delay for r in group.restarts[:3]]
    assert delays == [1.0, 2.0, 4.0]
    assert {r.returncode for r in group.restarts} == {3}


def test_stop_terminates_and_then_kills_and_is_idempotent(tmp_path: Path) -> None:
    marker = str(tmp_path / "stubborn")
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(600)"
    )
    lines: list[str] = []
    group = ServiceGroup(tmp_path / "logs", lines.append)
    polite = group.start(ServiceSpec("polite", python(SLEEPER, marker)))
    rude = group.start(ServiceSpec("stubborn", python(stubborn, marker)))
    wait_until(lambda: said(group.log_path("stubborn"), "up"), 20, "stubborn up")
    group.stop(timeout=1.0)
    assert not is_alive(polite, marker) and not is_alive(rude, marker)
    assert any("stubborn ignored SIGTERM" in line for line in lines), lines
    assert group.restarts == []  # a stop is not a crash
    group.stop()  # again: nothing to do, no error
    assert group.pids() == {}


def test_children_die_with_the_parent(tmp_path: Path) -> None:
    """A parent SIGKILLed leaves no child: PR_SET_PDEATHSIG."""
    import subprocess

    marker = str(tmp_path / "orphan")
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from shell.services import ServiceGroup, ServiceSpec\n"
        f"group = ServiceGroup(Path({str(tmp_path / 'logs')!r}), print)\n"
        f"argv = [sys.executable, '-c', {SLEEPER!r}, {marker!r}]\n"
        "pid = group.start(ServiceSpec('child', argv))\n"
        "print(pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert is_alive(child, marker)
    parent.kill()
    parent.wait()
    wait_until(lambda: not is_alive(child, marker), 10, "the child to die with its parent")


def test_dgm_command_runs_this_interpreter(tmp_path: Path) -> None:
    command = dgm_command("collect", "--once", config=tmp_path / "dgm.toml")
    assert command[:3] == [sys.executable, "-m", "shell.cli"]
    assert command[3:] == ["--config", str(tmp_path / "dgm.toml"), "collect", "--once"]


def test_stop_leaves_no_grandchild(tmp_path: Path) -> None:
    """What a child started (a Spark JVM under `dgm analyze`) goes with it."""
    marker = str(tmp_path / "grandchild")
    parent = (
        "import subprocess, sys, time\n"
        "code = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "time.sleep(600)'\n"
        f"child = subprocess.Popen([sys.executable, '-c', code, {marker!r}])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    group = ServiceGroup(tmp_path / "logs", lambda line: None)
    group.start(ServiceSpec("parent", [sys.executable, "-c", parent]))
    log = group.log_path("parent")
    pid = int(
        wait_until(
            lambda: next((ln for ln in log.read_text().splitlines() if ln.isdigit()), None),
            20,
            "the grandchild's pid",
        )
    )
    assert is_alive(pid, marker)
    group.stop(timeout=5.0)
    wait_until(lambda: not is_alive(pid, marker), 10, "the grandchild to be gone")
