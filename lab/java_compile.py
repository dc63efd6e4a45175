"""Compiling one of the lab's Java sources (the Streams app, the transactional copier) against
a set of Kafka jars into a classes folder, whole or not at all (jar_cache.replace_whole)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from embedded_kafka.jar_cache import replace_whole
from embedded_kafka.java import find_java

Progress = Callable[[str], None]


def compile_source(
    source_file: str,
    source: bytes,
    libs: Path,
    classes: Path,
    against: str,
    progress: Progress,
    error: type[Exception],
) -> None:
    """`source` (the text of `source_file`) compiled against the jars in `libs` into
    `classes`; `error` raised with javac's output when it fails, or when there is no javac."""
    javac = _javac(source_file, error)
    progress(f"Compiling {source_file} against {against} into {classes}...")

    def compile_into(staging: Path) -> None:
        (staging / source_file).write_bytes(source)
        result = subprocess.run(
            [str(javac), "-J-Xmx256m", "-d", str(staging), "-cp", str(libs / "*"),
             str(staging / source_file)],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise error(f"javac failed on {source_file}:\n{result.stderr.strip()}")
        (staging / source_file).unlink()

    replace_whole(classes, against, compile_into)


def _javac(source_file: str, error: type[Exception]) -> Path:
    javac = find_java().with_name("javac")
    if javac.exists():
        return javac
    found = shutil.which("javac")
    if found is None:
        raise error(
            f"compiling {source_file} needs javac (a JDK 17+, not only a JRE): none next to "
            f"{find_java()} nor on PATH"
        )
    return Path(found)
