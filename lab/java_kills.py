"""SIGKILLs of a lab Java application (lab.java_child) at drawn moments of its work, and the
report's fields about them: what the Kafka Streams, MirrorMaker 2 and console relay runners
share (the relay has its own report fields)."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from typing import Any, Protocol, TypedDict

from lab.java_child import JavaSupervisor


class Restartable(Protocol):
    """What kills and restarts the application (lab.java_child, lab.console.relay)."""

    def kill_and_restart(self) -> object: ...


class Kills(TypedDict):
    """The report fields about the kills."""

    kills: list[dict[str, Any]]
    kills_while_producing: int  # of the kills, those before the producer had finished
    exits: list[dict[str, Any]]  # instances that died without being killed


def kill_while_working(
    supervisor: Restartable,
    kills: int,
    working: Callable[[int], None],
    after: tuple[float, float],
    chosen: random.Random,
    producer_done: Callable[[], bool],
) -> int:
    """SIGKILL the application `kills` times, each a while drawn from `after` (seconds) once
    `working(number)` has seen instance `number` at work, restarting it each time; how many
    kills came before the producer had finished."""
    while_producing = 0
    for number in range(1, kills + 1):
        working(number)
        time.sleep(chosen.uniform(*after))  # a drawn moment, not a wait for an event
        while_producing += not producer_done()
        supervisor.kill_and_restart()
    return while_producing


def kills_report(supervisor: JavaSupervisor, while_producing: int) -> Kills:
    return Kills(
        kills=[dataclasses.asdict(k) for k in supervisor.kills],
        kills_while_producing=while_producing,
        exits=[dataclasses.asdict(e) for e in supervisor.exits],
    )
