"""Find a Java 17+ runtime for the embedded broker, or say clearly what to do instead."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from dgm.util.errors import UserFacingError

MIN_JAVA = 17

NO_BROKER_HINT = (
    "To monitor an existing cluster instead, set bootstrap_servers under [cluster] in dgm.toml "
    "(or the DGM_BOOTSTRAP environment variable); no local broker is needed then."
)


class JavaNotFound(UserFacingError):
    pass


def find_java() -> Path:
    """The `java` of JAVA_HOME, else the one on PATH; it must be Java 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home) / "bin" / "java" if java_home else None
    if candidate is None or not candidate.exists():
        found = shutil.which("java")
        candidate = Path(found) if found else None
    if candidate is None:
        raise JavaNotFound(
            f"the embedded Kafka broker needs Java {MIN_JAVA}+, and no `java` was found "
            f"(JAVA_HOME unset, nothing on PATH). Install a JDK {MIN_JAVA}+ "
            f"(Debian/Ubuntu: apt-get install openjdk-17-jre-headless). {NO_BROKER_HINT}"
        )
    major = java_major_version(candidate)
    if major < MIN_JAVA:
        raise JavaNotFound(
            f"the embedded Kafka broker needs Java {MIN_JAVA}+, but {candidate} is Java {major}. "
            f"Set JAVA_HOME to a newer JDK. {NO_BROKER_HINT}"
        )
    return candidate


def java_major_version(java: Path) -> int:
    result = subprocess.run(
        [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
    )
    return parse_java_major(result.stderr + result.stdout)


def parse_java_major(version_output: str) -> int:
    """`openjdk version "17.0.15"` -> 17; the old `"1.8.0_402"` scheme -> 8."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not match:
        raise JavaNotFound(f"could not read the Java version from: {version_output.strip()!r}")
    major = int(match.group(1))
    if major == 1 and match.group(2):
        return int(match.group(2))
    return major
