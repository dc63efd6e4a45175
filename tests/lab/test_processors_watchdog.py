"""A call blocked past its deadline ends the process with EXIT_HUNG; one that returns does not."""

from __future__ import annotations

import subprocess
import sys
import time

from lab.processors.watchdog import EXIT_HUNG
from lab.supervisor import child_env

BLOCKED = """
import time
from lab.processors.watchdog import deadline
with deadline({deadline}, "a call"):
    time.sleep({sleep})
print("returned")
"""


def run(deadline: float, sleep: float) -> subprocess.CompletedProcess[str]:
    code = BLOCKED.format(deadline=deadline, sleep=sleep)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60
    )


def test_a_call_blocked_past_its_deadline_exits_the_process() -> None:
    began = time.monotonic()
    done = run(deadline=0.5, sleep=30)
    assert done.returncode == EXIT_HUNG
    assert time.monotonic() - began < 20  # the deadline, not the call, ended it
    assert "returned" not in done.stdout
    assert "a call still blocked after" in done.stderr


def test_a_call_that_returns_in_time_goes_on() -> None:
    done = run(deadline=5, sleep=0.1)
    assert (done.returncode, done.stdout.strip()) == (0, "returned")
