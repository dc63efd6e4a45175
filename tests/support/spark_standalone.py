"""A real Spark standalone cluster on loopback: a master and one-core workers started from
pyspark's own `spark-class` (executors in their own JVMs, with their own Python workers), for
the tests (tests/scenarios/test_standalone_cluster.py) and the soak benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.find_spark_home import _find_spark_home

from dgm.util.ports import free_ports
from dgm.util.waiting import wait_until

# Every process stays on loopback (master, workers, the driver's RPC and block manager), and
# the executors' Python workers run this interpreter (it has pyspark's pandas and pyarrow).
LOOPBACK = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def alive_workers(ui_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
        state: dict[str, Any] = json.load(answer)
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@contextmanager
def standalone(
    commands: list[list[str]], env: dict[str, str], ready: Callable[[], bool], logs: Path
) -> Iterator[None]:
    """The Spark daemons `commands` start, each logging to logs/process-N.log, until `ready()`
    holds (two minutes at most); terminated on exit, killed when they linger."""
    processes = []
    outputs = []
    try:
        for n, command in enumerate(commands):
            outputs.append((logs / f"process-{n}.log").open("w"))
            processes.append(
                subprocess.Popen(command, stdout=outputs[-1], stderr=subprocess.STDOUT, env=env)
            )

        def up() -> bool:
            for n, process in enumerate(processes):
                if process.poll() is not None:
                    said = (logs / f"process-{n}.log").read_text()[-3000:]
                    raise AssertionError(f"{commands[n]} exited with {process.returncode}: {said}")
            return ready()

        wait_until(up, 120, "the standalone master and its workers", interval=0.5)
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for output in outputs:
            output.close()


@contextmanager
def standalone_cluster(logs: Path, workers: int = 2, memory: str = "1g") -> Iterator[str]:
    """spark://127.0.0.1:port of a master with `workers` one-core workers of `memory` each."""
    spark_class = Path(_find_spark_home()) / "bin" / "spark-class"
    port, ui = free_ports(2)
    master = f"spark://127.0.0.1:{port}"
    commands = [
        [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)],
        *(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", master,
             "--host", "127.0.0.1", "--cores", "1", "--memory", memory, "--webui-port", "0",
             "--work-dir", str(logs / f"work-{n}")]
            for n in range(workers)
        ),
    ]  # fmt: skip

    def ready() -> bool:
        try:
            return alive_workers(ui) == workers
        except OSError:
            return False

    with standalone(commands, LOOPBACK, ready, logs):
        yield master
