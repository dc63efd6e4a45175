"""The analysis on a real Spark standalone cluster — a master and two workers started from
pyspark's own `spark-class` on loopback, executors in their own JVMs and Python workers —
publishes, from an incremental cycle, the same tables as a rebuild in local mode (the
session's Spark) does (tests/support/cluster_run.py).

And docker-compose.yml's Spark cluster as its services start it: the master's and the
worker's commands and health checks, and the analysis service's `dgm analyze`, read from the
file, with only addresses and container paths replaced (tests/support/compose_file.py), and Python
found as in the dgm image: by PATH, the installed dgm's Python first, no PYSPARK_PYTHON."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dgm.contracts.published import TABLES, open_read_only, published_path
from dgm.util.ports import free_ports
from tests.support.cluster_run import publish_rebuilt
from tests.support.compose_file import command, compose_services, healthcheck, in_test
from tests.support.dgm_processes import quick_jvm
from tests.support.small_pipeline import DUPLICATED, collected
from tests.support.spark_standalone import LOOPBACK, standalone, standalone_cluster

# Run as a module from the repository root, where `tests.support` is importable as it is.
RUNNER = "tests.support.cluster_run"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """spark://127.0.0.1:port of a standalone master with two one-core workers."""
    with standalone_cluster(tmp_path_factory.mktemp("cluster")) as master:
        yield master


def _run(master: str, out: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", RUNNER, master, str(out)],
        cwd=REPO,
        env=quick_jvm(LOOPBACK),  # the driver's JVM; the workers start the executors' own
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
def test_a_standalone_cluster_publishes_what_local_mode_does(
    cluster: str, spark: Any, tmp_path: Path
) -> None:
    said = _run(cluster, tmp_path / "cluster")
    assert "executors+driver 3" in said  # two executors on the workers, and the driver
    assert "second cycle: " in said and "message ids touched" in said  # not a rebuild
    publish_rebuilt(spark, tmp_path / "local")
    on_cluster, local = _tables(tmp_path / "cluster"), _tables(tmp_path / "local")
    assert on_cluster == local  # the cluster's incremental cycle, local mode's rebuild
    verdicts = {row[0]: row for row in on_cluster["verdicts"]}
    assert set(verdicts) == {"a", "b"}
    assert len(on_cluster["duplicates"]) > 100 and len(on_cluster["lost"]) > 50
    with open_read_only(published_path(tmp_path / "cluster")) as connection:
        master = connection.execute("SELECT spark_master FROM runs").fetchone()
    assert master == (cluster,)


# --- docker-compose.yml's Spark cluster --------------------------------------------------

COMPOSE_SPARK = ("spark-master", "spark-worker")
# What the image's environment holds that a test machine's may not: Java, the caches.
PASSED = ("HOME", "JAVA_HOME", "DGM_CACHE_DIR", "XDG_CACHE_HOME")


def image_like_env() -> dict[str, str]:
    """The dgm image's way of finding Python: PATH, with the Python that has dgm and its
    packages (/usr/local/bin's there, this interpreter's folder here) ahead of the system's.
    No PYSPARK_PYTHON: the executors' Python workers are the `python3` PATH finds."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "SPARK_LOCAL_IP": "127.0.0.1",  # every daemon and the driver on loopback
        **{name: os.environ[name] for name in PASSED if name in os.environ},
    }
    python3 = shutil.which("python3", path=env["PATH"])
    assert python3 and Path(python3).resolve() == Path(sys.executable).resolve(), python3
    return env


@pytest.fixture(scope="module")
def compose_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(the master's URL, its logs folder) of compose's spark-master and spark-worker, ready
    when their own health checks say so."""
    services = compose_services()
    logs = tmp_path_factory.mktemp("compose-cluster")
    port, ui, worker_ui = free_ports(3)
    addresses = {
        "spark-master": "127.0.0.1",
        "7077": str(port),
        "8080": str(ui),
        "8081": str(worker_ui),
        "/tmp/spark-work": str(logs / "work"),
    }
    commands = [in_test(command(services[name]), addresses) for name in COMPOSE_SPARK]
    checks = [in_test(healthcheck(services[name]), addresses) for name in COMPOSE_SPARK]
    env = image_like_env()

    def healthy() -> bool:
        return all(
            subprocess.run(check, env=env, capture_output=True, timeout=60).returncode == 0
            for check in checks
        )

    with standalone(commands, env, healthy, logs):
        yield f"spark://127.0.0.1:{port}", logs


@pytest.mark.slow
def test_composes_spark_cluster_runs_the_analysis_services_command(
    compose_cluster: tuple[str, Path], kafka: Any, tmp_path: Path
) -> None:
    master, logs = compose_cluster
    pipeline, config = collected(kafka, tmp_path)
    analysis = compose_services()["analysis"]
    argv = in_test(
        command(analysis),
        {
            "/etc/dgm/dgm.toml": str(config),
            "spark-master": "127.0.0.1",
            "7077": master.split(":")[-1],
        },
    )
    assert argv[0] == "dgm" and argv[argv.index("--master") + 1] == master, argv
    # The driver runs this tree's dgm, a short-lived JVM (tests/support/dgm_processes.py).
    env = quick_jvm({**image_like_env(), "PYTHONPATH": str(REPO)})
    done = subprocess.run([*argv, "--once"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    state = config.parent / "state"
    with open_read_only(published_path(state)) as db:
        assert db.execute("SELECT spark_master FROM runs").fetchall() == [(master,)]
        verdicts = db.execute("SELECT pipeline, achieved FROM verdicts").fetchall()
        copies = db.execute("SELECT count(*) FROM duplicates WHERE topic = ?", [pipeline.sink])
        assert copies.fetchone() == (2 * DUPLICATED,)
    assert verdicts == [("crashy", "at-least-once")]
    # The Python work ran in an executor the worker started, not in the driver.
    executors = list((logs / "work").glob("app-*/*/stderr"))
    assert executors, f"no executor ran under {logs / 'work'}"
    # The analysis service's health check sees this publication as fresh.
    check = in_test(healthcheck(analysis), {"/etc/dgm/dgm.toml": str(config)})
    assert subprocess.run(check, env=env, capture_output=True, timeout=60).returncode == 0
