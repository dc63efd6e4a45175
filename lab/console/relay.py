"""Kafka's console consumer piped into its console producer, as `kafka-console-consumer ... |
kafka-console-producer ...` in a shell (an OS pipe between the two processes): a relay from a
source topic to a sink topic made of Kafka's own tools only, SIGKILLed and restarted on request.
With `share_group`, the consumer is Kafka's console share consumer (KIP-932): it acknowledges
each record it printed when it next polls, so a SIGKILL leaves what it printed since then
acquired and unacknowledged, and the broker delivers it again once its lock expires.

It gives at-least-once, and only because it is ended as below:
- the console consumer auto-commits, inside poll(), the offsets of records an earlier poll
  returned, and it has printed (and flushed) each of those into the pipe before polling again:
  a committed record is in the pipe, in the producer or in the sink;
- so the consumer may be SIGKILLed at any moment: what it printed since its last commit is
  printed again by its successor (the duplicates), and the pipe outlives it;
- the console producer may not: it sends asynchronously (linger 1 s), so a SIGKILL would lose
  the lines in its batches and in the pipe, whose offsets may well be committed. It is left to
  read the pipe to its end (the consumer was its only writer), send what it read and exit;
- a send the producer gives up on after its retries is only logged by the tool: lost. A healthy
  broker does not make that happen;
- the consumer writes a line's key, separator and value as separate flushed writes, so a SIGKILL
  can leave a torn last line in the pipe: a bare key makes the producer fail with "No key
  separator found" and exit 1, having sent every line before it (the exit's cause is then
  "torn line"). The torn record's offset was not committed: the successor prints it again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from embedded_kafka.tools import tool_command
from lab import child_process

CONSUMER, PRODUCER = "console-consumer", "console-producer"
SHARE_CONSUMER = "console-share-consumer"
SEPARATOR = "\t"  # between key and value on each line of the pipe
DRAIN_TIMEOUT = 30.0  # the producer sends what it read (linger 1 s) and exits well within this
STOP_TIMEOUT = 30.0
TORN_LINE = "No key separator found"  # the console producer's error on a bare key
RESTART_DELAY = 1.0  # seconds before restarting a relay that died on its own
JVM = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")  # small and quick to start
# The consumer's stdout is the data: its log lines must go to stderr, never into the pipe.
LOG4J2 = """status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1}: %m%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = STDERR
"""
Progress = Callable[[str], None]


@dataclass(frozen=True)
class RelayTopics:
    bootstrap_servers: str
    source: str
    sink: str
    group: str  # the console consumer's group (a share group with share_group)
    auto_commit_interval_ms: int
    share_group: bool = False


def relay_commands(topics: RelayTopics, log_config: Path) -> tuple[list[str], list[str]]:
    """The console consumer's and the console producer's command lines."""
    jvm = [*JVM, f"-Dlog4j2.configurationFile={log_config}"]
    # The option names of Kafka 4.2 and later (KIP-1147), whose tools run here (the default
    # version's): 4.4's console consumer prints the deprecation of --consumer-property and
    # --property on stdout, into the pipe, where the producer refuses it as a record.
    printed = [
        "--formatter-property", "print.key=true",
        "--formatter-property", f"key.separator={SEPARATOR}",
    ]  # fmt: skip
    producer = [
        "--bootstrap-server", topics.bootstrap_servers, "--topic", topics.sink,
        "--reader-property", "parse.key=true", "--reader-property", f"key.separator={SEPARATOR}",
    ]  # fmt: skip
    if topics.share_group:
        # Where a new share group starts is the group's config (share.auto.offset.reset),
        # set before the relay starts (lab.share_group.start_from_the_beginning).
        shared = [
            "--bootstrap-server", topics.bootstrap_servers, "--topic", topics.source,
            "--group", topics.group, *printed,
        ]  # fmt: skip
        return (
            tool_command(SHARE_CONSUMER, shared, jvm_options=jvm),
            tool_command(PRODUCER, producer, jvm_options=jvm),
        )
    consumer = [
        "--bootstrap-server", topics.bootstrap_servers, "--topic", topics.source,
        "--group", topics.group,
        # Only a group without committed offsets starts at the beginning: the first instance.
        "--from-beginning",
        "--command-property", f"auto.commit.interval.ms={topics.auto_commit_interval_ms}",
        # Static membership: a restarted consumer takes the killed one's place at once, instead
        # of a rebalance waiting out the dead member's session (45 s).
        "--command-property", "group.protocol=classic",
        "--command-property", f"group.instance.id={topics.group}-relay",
        *printed,
    ]  # fmt: skip
    return (
        tool_command(CONSUMER, consumer, jvm_options=jvm),
        tool_command(PRODUCER, producer, jvm_options=jvm),
    )


def utc(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Kill:
    at: float  # unix time of the SIGKILL
    at_utc: str
    process: str  # console-consumer, or console-producer if it did not drain in time
    pid: int
    returncode: int  # -9: died of the SIGKILL


@dataclass(frozen=True)
class Exit:
    """A process that ended without a SIGKILL: the producer once it has sent its whole input
    ("drained") or all of it before a torn last line ("torn line"), or either one on its own
    ("died")."""

    at: float
    at_utc: str
    process: str
    pid: int
    returncode: int
    cause: str


@dataclass(frozen=True)
class Restart:
    at: float
    at_utc: str
    consumer_pid: int
    producer_pid: int


class EventLog:
    """The relay's own log, `<UTC time> <event> key=value ...` a line (start, kill, exit,
    restart, stop), each line also said as progress."""

    def __init__(self, path: Path, say: Progress) -> None:
        self.path, self.say = path, say
        self._lock = threading.Lock()

    def write(self, at: float, event: str, **fields: object) -> None:
        line = " ".join([utc(at), event, *(f"{k}={v}" for k, v in fields.items())])
        with self._lock, self.path.open("a") as log:
            log.write(line + "\n")
        self.say(f"console relay: {line}")


@dataclass(eq=False)
class _Pair:
    consumer: subprocess.Popen[str]
    producer: subprocess.Popen[str]
    producer_log_from: int  # where the producer's lines begin in its log
    ended: bool = False


def _spawn_pair(commands: tuple[list[str], list[str]], log_dir: Path) -> _Pair:
    log_dir.mkdir(parents=True, exist_ok=True)
    producer_log = log_dir / f"{PRODUCER}.log"
    log_from = producer_log.stat().st_size if producer_log.exists() else 0
    read_end, write_end = os.pipe()
    try:
        producer = child_process.spawn(commands[1], producer_log, read_end)
        consumer = child_process.spawn(
            commands[0], log_dir / f"{CONSUMER}.log", subprocess.DEVNULL, stdout=write_end
        )
    finally:
        # Only the children may hold the pipe: the consumer's death must end the producer's input.
        os.close(read_end)
        os.close(write_end)
    child_process.transcribe(producer, log_dir / f"{PRODUCER}.out", lambda _: None)
    return _Pair(consumer, producer, log_from)


class ConsoleRelay:
    """Keeps one relay running: kills it on request and restarts it; a relay that dies on its
    own is ended the same way, recorded and restarted too."""

    def __init__(self, commands: tuple[list[str], list[str]], log_dir: Path, log: EventLog) -> None:
        self.commands, self.log_dir, self.log = commands, log_dir, log
        self.kills: list[Kill] = []
        self.exits: list[Exit] = []
        self.restarts: list[Restart] = []
        self.started = threading.Event()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._pair: _Pair | None = None
        self._monitor = threading.Thread(target=self._keep_running, daemon=True)

    def start(self) -> None:
        with self._lock:
            self._pair = self._spawn("start")
        self._monitor.start()
        self.started.set()

    def kill_and_restart(self) -> Kill:
        """SIGKILL the consumer, let the producer send what it read and exit, start anew."""
        with self._lock:
            pair = self._current()
            kill = self._kill(CONSUMER, pair.consumer)
            self._drain(pair)
            self._pair = self._spawn("restart")
        return kill

    def stop(self) -> int | None:
        """For good: the consumer closes cleanly, the producer drains; the producer's exit."""
        self._stopping.set()
        if self._monitor.is_alive():
            self._monitor.join()
        with self._lock:
            pair = self._pair
            if pair is None or pair.ended:
                return None
            # SIGTERM: the consumer closes, committing what it printed (all of it is in the pipe).
            consumer = child_process.stop(pair.consumer, STOP_TIMEOUT)
            returncode = self._drain(pair)
            pair.ended = True
            self.log.write(time.time(), "stop", consumer_returncode=consumer)
            return returncode

    def _current(self) -> _Pair:
        assert self._pair is not None, "start() first"
        return self._pair

    def _spawn(self, event: str) -> _Pair:
        pair = _spawn_pair(self.commands, self.log_dir)
        at, consumer, producer = time.time(), pair.consumer.pid, pair.producer.pid
        if event == "restart":
            self.restarts.append(Restart(at, utc(at), consumer, producer))
        self.log.write(at, event, consumer_pid=consumer, producer_pid=producer)
        return pair

    def _kill(self, process: str, popen: subprocess.Popen[str]) -> Kill:
        popen.send_signal(signal.SIGKILL)
        at = time.time()
        kill = Kill(at, utc(at), process, popen.pid, popen.wait())
        self.kills.append(kill)
        self.log.write(at, "kill", process=process, pid=kill.pid, returncode=kill.returncode)
        return kill

    def _drain(self, pair: _Pair) -> int:
        """Until the producer has sent its input and exited; SIGKILLed if it has not within
        DRAIN_TIMEOUT (what it still held is then lost)."""
        producer = pair.producer
        try:
            producer.wait(DRAIN_TIMEOUT)
        except subprocess.TimeoutExpired:
            return self._kill(PRODUCER, producer).returncode
        torn = producer.returncode != 0 and TORN_LINE in self._producer_errors(pair)
        return self._exited(PRODUCER, producer, "torn line" if torn else "drained")

    def _producer_errors(self, pair: _Pair) -> str:
        """What `pair`'s producer wrote to its log (the log holds every producer's)."""
        with (self.log_dir / f"{PRODUCER}.log").open("rb") as log:
            log.seek(pair.producer_log_from)
            return log.read().decode(errors="replace")

    def _exited(self, process: str, popen: subprocess.Popen[str], cause: str) -> int:
        at, returncode = time.time(), popen.wait()
        self.exits.append(Exit(at, utc(at), process, popen.pid, returncode, cause))
        fields = {"process": process, "pid": popen.pid, "returncode": returncode, "cause": cause}
        self.log.write(at, "exit", **fields)
        return returncode

    def _keep_running(self) -> None:
        # Ending, waiting and restarting under the lock: a kill never finds an ended relay.
        while not self._stopping.wait(0.1):
            with self._lock:
                pair = self._current()
                if pair.consumer.poll() is None and pair.producer.poll() is None:
                    continue
                if pair.consumer.poll() is not None:
                    self._exited(CONSUMER, pair.consumer, "died")
                    self._drain(pair)
                else:
                    # The pipe has lost its reader: a SIGKILL keeps the consumer from
                    # committing what it printed into it, as a clean close would.
                    self._exited(PRODUCER, pair.producer, "died")
                    self._kill(CONSUMER, pair.consumer)
                pair.ended = True
                if self._stopping.wait(RESTART_DELAY):
                    return
                self._pair = self._spawn("restart")
