"""The analysis on a real Spark standalone cluster — a master and two workers started from
pyspark's own `spark-class` on loopback, executors in their own JVMs and Python workers —
publishes the same tables as in local mode, and an incremental cycle there the same as a
rebuild (tests/spark_jobs/cluster_run.py does both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.find_spark_home import _find_spark_home

from dgm.ports import free_ports
from dgm.published import TABLES, open_read_only, published_path
from dgm.waiting import wait_until

RUNNER = Path(__file__).with_name("cluster_run.py")
REPO = Path(__file__).resolve().parents[2]
# Every process stays on loopback (master, workers, the driver's RPC and block manager), and
# the executors' Python workers run this interpreter (it has pyspark's pandas and pyarrow).
LOOPBACK = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}


def _alive_workers(ui_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as answer:
        state: dict[str, Any] = json.load(answer)
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:port of a standalone master with two one-core workers."""
    spark_class = Path(_find_spark_home()) / "bin" / "spark-class"
    logs = tmp_path_factory.mktemp("cluster")
    port, ui = free_ports(2)
    master = f"spark://127.0.0.1:{port}"
    commands = [
        [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)],
        *(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", master,
             "--host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", "0",
             "--work-dir", str(logs / f"work-{n}")]
            for n in range(2)
        ),
    ]  # fmt: skip
    processes = []
    try:
        for n, command in enumerate(commands):
            log = (logs / f"process-{n}.log").open("w")
            processes.append(
                subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=LOOPBACK)
            )

        def ready() -> bool:
            try:
                return _alive_workers(ui) == 2
            except OSError:
                return False

        wait_until(ready, 120, "a standalone master with two alive workers", interval=0.5)
        yield master
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


def _run(master: str, out: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(RUNNER), master, str(out)],
        cwd=REPO,
        env=LOOPBACK,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def _tables(out: Path) -> dict[str, list[tuple[Any, ...]]]:
    with open_read_only(published_path(out)) as connection:
        return {
            t.name: sorted(connection.execute(f'SELECT * FROM "{t.name}"').fetchall(), key=repr)
            for t in TABLES
            if t.name != "runs"  # its spark_master says where it ran
        }


@pytest.mark.slow
def test_a_standalone_cluster_publishes_what_local_mode_does(cluster: str, tmp_path: Path) -> None:
    said = _run(cluster, tmp_path / "cluster")
    assert "executors+driver 3" in said  # two executors on the workers, and the driver
    assert "second cycle: " in said and "message ids touched" in said  # not a rebuild
    assert "incremental equals rebuild: True" in said
    _run("local[2]", tmp_path / "local")
    on_cluster, local = _tables(tmp_path / "cluster"), _tables(tmp_path / "local")
    assert on_cluster == local
    verdicts = {row[0]: row for row in on_cluster["verdicts"]}
    assert set(verdicts) == {"a", "b"}
    assert len(on_cluster["duplicates"]) > 100 and len(on_cluster["lost"]) > 50
    with open_read_only(published_path(tmp_path / "cluster")) as connection:
        master = connection.execute("SELECT spark_master FROM runs").fetchone()
    assert master == (cluster,)
