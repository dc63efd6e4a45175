"""The console relay's supervision, with stand-ins for Kafka's tools: a writer piped into a
reader that appends its input to a file. No broker: the pipe, the kills and the log only."""

from __future__ import annotations

import sys
from pathlib import Path

from dgm.util.waiting import wait_until
from lab.console.relay import ConsoleRelay, EventLog

# Each line is logged on stderr once it is in the pipe: what a kill must not lose.
WRITER = """import os, sys, time
for n in range(10**6):
    print(f"k\\t{os.getpid()}-{n}", flush=True)
    print(f"{os.getpid()}-{n}", file=sys.stderr, flush=True)
    time.sleep(0.01)
"""
QUITTER = "print('k\\t0', flush=True); raise SystemExit(3)"
READER = "import sys\nwith open(sys.argv[1], 'a', 1) as f:\n for line in sys.stdin: f.write(line)"
# Kafka's console producer on a line without its separator: the error, exit 1.
PARSER = """import sys
with open(sys.argv[1], 'a', 1) as f:
    for n, line in enumerate(sys.stdin, 1):
        if "\\t" not in line:
            sys.exit(f"No key separator found on line number {n}: {line!r}")
        f.write(line)
"""
# The first instance leaves a bare key in the pipe (a kill mid-line); later ones write lines.
TEARER = f"""import os, sys, time
if os.path.exists(sys.argv[1]):
{"".join("    " + line + chr(10) for line in WRITER.splitlines())}else:
    for n in range(20):
        print(f"k\\t{{n}}", flush=True)
    sys.stdout.write("k"); sys.stdout.flush(); time.sleep(60)
"""


def relay(tmp_path: Path, writer: str) -> tuple[ConsoleRelay, Path]:
    out = tmp_path / "sink.txt"
    commands = ([sys.executable, "-c", writer], [sys.executable, "-c", READER, str(out)])
    return ConsoleRelay(commands, tmp_path / "logs", EventLog(tmp_path / "relay.log", print)), out


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_kill_lets_the_reader_drain_the_pipe_then_restarts_both(tmp_path: Path) -> None:
    supervisor, out = relay(tmp_path, WRITER)
    supervisor.start()
    try:
        wait_until(lambda: lines(out) >= 20, 30, "the reader to get lines")
        kill = supervisor.kill_and_restart()
        # The reader ended by itself at the end of its input: all the killed writer printed.
        printed = (tmp_path / "logs" / "console-consumer.log").read_text().split()
        killed = [line for line in printed if line.startswith(f"{kill.pid}-")]
        assert len(killed) >= 20
        assert set(killed) <= {line.split("\t")[1] for line in out.read_text().splitlines()}
        before = lines(out)
        wait_until(lambda: lines(out) > before, 30, "the restarted relay to relay")
    finally:
        assert supervisor.stop() == 0
    assert (kill.process, kill.returncode) == ("console-consumer", -9)
    assert [(e.process, e.returncode, e.cause) for e in supervisor.exits] == [
        ("console-producer", 0, "drained")
    ] * 2
    assert len(supervisor.restarts) == 1 and supervisor.kills == [kill]
    events = [line.split()[1] for line in (tmp_path / "relay.log").read_text().splitlines()]
    assert events == ["start", "kill", "exit", "restart", "exit", "stop"]


def test_a_consumer_that_dies_on_its_own_is_recorded_and_restarted(tmp_path: Path) -> None:
    supervisor, out = relay(tmp_path, QUITTER)
    supervisor.start()
    try:
        wait_until(lambda: len(supervisor.restarts) >= 2, 30, "two restarts")
    finally:
        supervisor.stop()
    died = [(e.process, e.returncode) for e in supervisor.exits if e.cause == "died"]
    assert died[:2] == [("console-consumer", 3)] * 2
    assert supervisor.kills == []
    assert lines(out) >= 2  # each instance's line reached the reader before it ended


def test_a_kill_that_tears_the_last_line_is_told_apart_from_a_clean_drain(
    tmp_path: Path,
) -> None:
    out, torn_once = tmp_path / "sink.txt", tmp_path / "torn-once"
    commands = (
        [sys.executable, "-c", TEARER, str(torn_once)],
        [sys.executable, "-c", PARSER, str(out)],
    )
    supervisor = ConsoleRelay(commands, tmp_path / "logs", EventLog(tmp_path / "relay.log", print))
    supervisor.start()
    try:
        wait_until(lambda: lines(out) >= 20, 30, "the reader to get the whole lines")
        torn_once.touch()  # the restarted writer writes whole lines
        supervisor.kill_and_restart()
        before = lines(out)
        wait_until(lambda: lines(out) > before, 30, "the restarted relay to relay")
    finally:
        assert supervisor.stop() == 0
    # The first producer's error stays in the shared log: the second's drain is still clean.
    assert [(e.process, e.returncode, e.cause) for e in supervisor.exits] == [
        ("console-producer", 1, "torn line"),
        ("console-producer", 0, "drained"),
    ]
