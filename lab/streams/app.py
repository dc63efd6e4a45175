"""The Streams application's command line, and its supervisor (lab.java_child): SIGKILLed
and restarted on request, running from its `state RUNNING` line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from embedded_kafka.java import find_java
from lab.java_child import ChildSpec, JavaSupervisor
from lab.streams.jars import MAIN_CLASS, StreamsClasspath

Guarantee = Literal["exactly_once_v2", "at_least_once"]
GUARANTEES: tuple[str, ...] = get_args(Guarantee)
HEAP = "-Xmx256m"  # the machine is shared: a small heap, one stream thread
Progress = Callable[[str], None]


@dataclass(frozen=True)
class AppSettings:
    bootstrap_servers: str
    application_id: str  # also the consumer group whose commits Kafka Streams makes
    source: str
    sink: str
    state_dir: Path
    guarantee: Guarantee
    drop_every_tenth: bool = False
    commit_interval_ms: int | None = None  # None: Kafka Streams' default for the guarantee

    def arguments(self) -> list[str]:
        found = [
            "--bootstrap-servers", self.bootstrap_servers,
            "--application-id", self.application_id,
            "--source", self.source,
            "--sink", self.sink,
            "--state-dir", str(self.state_dir),
            "--guarantee", self.guarantee,
        ]  # fmt: skip
        if self.drop_every_tenth:
            found.append("--drop-every-tenth")
        if self.commit_interval_ms is not None:
            found += ["--commit-interval-ms", str(self.commit_interval_ms)]
        return found


def app_command(classpath: StreamsClasspath, settings: AppSettings) -> list[str]:
    return [
        str(find_java()), HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        f"-Dlog4j2.configurationFile={classpath.log_config}",
        "-cp", classpath.classpath, MAIN_CLASS, *settings.arguments(),
    ]  # fmt: skip


def streams_state(line: str) -> bool | None:
    """The application says `state <NEW> <OLD>` at every state change: running from
    `state RUNNING` (its partitions assigned) until the next change."""
    words = line.split()
    if words[:1] != ["state"]:
        return None
    return words[1:2] == ["RUNNING"]


def streams_supervisor(command: list[str], log_dir: Path, progress: Progress) -> JavaSupervisor:
    return JavaSupervisor(ChildSpec(command, log_dir, "streams", streams_state), progress)
