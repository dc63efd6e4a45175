"""`dgm analyze --once` started by its console script's absolute path, with a PATH whose
`python3` lacks numpy (or that holds no Python at all): in local mode Spark's Python workers
still run dgm's own interpreter (spark_jobs.session.use_this_python), so the run publishes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb

from dgm.contracts.published import PUBLISHED_FILE
from tests.support.dgm_processes import quick_jvm
from tests.support.small_pipeline import DUPLICATED, collected

REPO = Path(__file__).resolve().parents[2]
DGM = Path(sys.executable).parent / "dgm"  # the console script pip installed beside python
BARE_PATH = "/usr/bin:/bin"
# Where the Spark Kafka source's jars are cached (dgm.util.paths.user_cache_dir), and Java.
PASSED = ("HOME", "DGM_CACHE_DIR", "XDG_CACHE_HOME", "JAVA_HOME", "DGM_BOOTSTRAP")


def has_numpy(python: str) -> bool:
    return subprocess.run([python, "-c", "import numpy"], capture_output=True).returncode == 0


def path_without_a_numpy_python(tmp_path: Path) -> str:
    """/usr/bin:/bin, unless its python3 has numpy: then a folder linking every program of
    those two but the Pythons, so that no `python3` is found at all."""
    python3 = shutil.which("python3", path=BARE_PATH)
    if python3 is None or not has_numpy(python3):
        return BARE_PATH
    bare = tmp_path / "bin"
    bare.mkdir()
    for folder in map(Path, BARE_PATH.split(":")):
        for program in folder.iterdir():
            link = bare / program.name
            if not program.name.startswith("python") and not link.exists():
                link.symlink_to(program)
    assert shutil.which("python3", path=str(bare)) is None
    return str(bare)


def test_local_mode_workers_run_dgms_python_whatever_path_says(kafka: Any, tmp_path: Path) -> None:
    assert DGM.is_file(), f"no dgm console script beside {sys.executable}"
    pipeline, config = collected(kafka, tmp_path)
    env = quick_jvm(
        {
            "PATH": path_without_a_numpy_python(tmp_path),
            "PYTHONPATH": str(REPO),  # this tree's code, whatever the installed one is
            "DGM_SPARK_MASTER": "local[1]",
            **{name: os.environ[name] for name in PASSED if name in os.environ},
        }
    )
    assert "PYSPARK_PYTHON" not in env
    done = subprocess.run(
        [str(DGM), "--config", str(config), "analyze", "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with duckdb.connect(str(config.parent / "state" / PUBLISHED_FILE), read_only=True) as db:
        verdicts = db.execute("SELECT pipeline, achieved FROM verdicts").fetchall()
        copies = db.execute("SELECT count(*) FROM duplicates WHERE topic = ?", [pipeline.sink])
        assert copies.fetchone() == (2 * DUPLICATED,)
    assert verdicts == [("crashy", "at-least-once")]
