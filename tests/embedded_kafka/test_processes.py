"""A child started with die_with_parent outlives the thread that started it (PR_SET_PDEATHSIG
is per thread) and dies with the process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dgm.util.waiting import wait_until
from embedded_kafka.processes import spawn
from lab.supervisor import child_env


def test_a_child_started_from_a_thread_outlives_the_thread(tmp_path: Path) -> None:
    started: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(
        target=lambda: started.append(
            spawn(["sleep", "60"], tmp_path / "child.log", die_with_parent=True)
        )
    )
    thread.start()
    thread.join()
    child = started[0]
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(2.0)  # before the fix, SIGKILLed as the thread ended
    finally:
        child.kill()
        child.wait()


def test_a_child_dies_with_its_process(tmp_path: Path) -> None:
    code = (
        "import threading, sys\n"
        "from pathlib import Path\n"
        "from embedded_kafka.processes import spawn\n"
        "out = []\n"
        f"t = threading.Thread(target=lambda: out.append(spawn(['sleep', '60'], "
        f"Path({str(tmp_path / 'child.log')!r}), die_with_parent=True)))\n"
        "t.start(); t.join()\n"
        "print(out[0].pid, flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60
    )
    pid = int(done.stdout.strip())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie whose parent (init) has not reaped it yet is dead too.
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"

    wait_until(gone, 10, f"child {pid} to die with its process")
