"""The line protocol a processor speaks on stdout, and the supervisor reads.

    ready <pid>                      consumer and producer are set up
    assigned <p>,<p>,...             partitions received in a rebalance ("-" for none)
    revoked <p>,<p>,...              partitions taken away in a rebalance
    phase produced <batch>           a batch's results are in the sink (topic or store)
    phase committed <batch>          that batch's source offsets are committed
    fenced                           a newer instance took over this transactional.id

After every `phase` line the processor spends `step_delay` seconds (simulated processing)
before its next step. A paced processor (`paced` in its settings: the supervisor's) first waits
for the supervisor's answer on stdin, one line after the settings' per `phase` line:

    go                               the supervisor has read the line and did not kill

so a SIGKILL sent on reading the line lands between the two steps however long the supervisor
took to read it (a loaded machine once made it miss the 0.15 s window: the kill landed after
the commit). End of input (the supervisor stopping, or gone) lets it go on.
"""

from __future__ import annotations

import sys
from typing import Literal, get_args

Phase = Literal["produced", "committed"]
PHASES: tuple[Phase, ...] = get_args(Phase)


def say(*words: object) -> None:
    """One protocol line, flushed at once: the supervisor acts on it while we sleep."""
    print(*words, file=sys.stdout, flush=True)


def settings_text(argument: str) -> str:
    """The settings JSON of `--settings-json`: the argument itself, or for `-` the first line on
    stdin (the supervisor keeps stdin open after it to pace the phases)."""
    return sys.stdin.readline() if argument == "-" else argument


def wait_for_go() -> None:
    """Block until the supervisor answers the phase line just said (or stdin ends)."""
    sys.stdin.readline()


def parse_phase(line: str) -> tuple[Phase, int] | None:
    """(phase, batch number) from a `phase` line; None for any other line."""
    parts = line.split()
    if len(parts) != 3 or parts[0] != "phase" or parts[1] not in PHASES:
        return None
    if not parts[2].isdigit():
        return None
    phase = next(p for p in PHASES if p == parts[1])
    return phase, int(parts[2])


def parse_partitions(line: str, verb: str) -> list[int] | None:
    """The partitions of an `assigned`/`revoked` line for `verb`; None for any other line."""
    parts = line.split()
    if len(parts) != 2 or parts[0] != verb:
        return None
    if parts[1] == "-":
        return []
    try:
        return [int(p) for p in parts[1].split(",")]
    except ValueError:
        return None


def format_partitions(partitions: list[int]) -> str:
    return ",".join(str(p) for p in sorted(partitions)) or "-"
