"""What the lab's child processes share, processors (lab.supervisor) and Java applications
(lab.java_child) alike: forked to die with the lab, stdout kept as a transcript stamped with
time and pid, stopped with a clean close first."""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO

# PR_SET_PDEATHSIG fires when the *thread* that forked the child ends: an instance restarted by
# a monitor thread was SIGKILLed when that thread ended, instead of stopping cleanly. Every
# instance is forked from this one thread, which lives as long as the process.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lab-spawner")


def _die_with_parent() -> None:
    # A child must not outlive the lab that started it, even one that is SIGKILLed itself.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spawn(
    command: Sequence[str],
    stderr_path: Path,
    stdin: int,
    env: Mapping[str, str] | None = None,
    stdout: int = subprocess.PIPE,
) -> subprocess.Popen[str]:
    """Start `command` in its own session (Ctrl-C of the lab must not reach it: the lab stops
    it), its stdout a text pipe (or the file descriptor `stdout`), its stderr appended to
    `stderr_path`."""
    return _SPAWNER.submit(_popen, list(command), stderr_path, stdin, env, stdout).result()


def _popen(
    command: list[str],
    stderr_path: Path,
    stdin: int,
    env: Mapping[str, str] | None,
    stdout: int,
) -> subprocess.Popen[str]:
    with stderr_path.open("a") as stderr:
        return subprocess.Popen(
            command,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=True,
            bufsize=1,
            env=None if env is None else dict(env),
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def transcribe(
    popen: subprocess.Popen[str], transcript_path: Path, on_line: Callable[[str], None]
) -> None:
    """In a daemon thread: every stdout line appended to `transcript_path` as
    `<time> <pid> <line>`, then handed to `on_line`."""
    assert popen.stdout is not None
    transcript = transcript_path.open("a")
    threading.Thread(
        target=_transcribe, args=(popen.stdout, transcript, popen.pid, on_line), daemon=True
    ).start()


def _transcribe(
    stdout: IO[str], transcript: IO[str], pid: int, on_line: Callable[[str], None]
) -> None:
    with transcript:
        for line in stdout:
            transcript.write(f"{time.time():.3f} {pid} {line}")
            transcript.flush()
            on_line(line)


def answer_go(popen: subprocess.Popen[str], lock: threading.Lock) -> None:
    """Let a paced child go on after the line it waits on (lab.processors.announce), unless it
    is gone: killed on that line, stopping, or dead on its own. `lock` guards its stdin."""
    with lock:
        stdin = popen.stdin
        if stdin is None or stdin.closed or popen.poll() is not None:
            return
        with contextlib.suppress(OSError):  # it died since poll(): nobody waits for it
            stdin.write("go\n")
            stdin.flush()


def end_input(popen: subprocess.Popen[str], lock: threading.Lock) -> None:
    """Close a paced child's stdin: whatever it waits on goes on without an answer."""
    with lock:
        if popen.stdin is not None and not popen.stdin.closed:
            with contextlib.suppress(OSError):
                popen.stdin.close()


def stop(popen: subprocess.Popen[str], timeout: float) -> int:
    """SIGTERM (the child finishes what it does and closes), SIGKILL after `timeout`."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        try:
            return popen.wait(timeout)
        except subprocess.TimeoutExpired:
            popen.kill()
    return popen.wait()
