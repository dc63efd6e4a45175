"""Fetch pinned jars from Maven Central over plain HTTPS, each checked against its SHA-256.

Only the standard library: urllib honours HTTPS_PROXY/HTTP_PROXY/NO_PROXY like every other
client. DGM_MAVEN_REPOSITORY names a mirror with Maven Central's layout (https:// or file://).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

from dgm.util.errors import UserFacingError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
PARALLEL_DOWNLOADS = 4
CHUNK = 1 << 16
TIMEOUT_S = 60.0

Progress = Callable[[str], None]


class DownloadError(UserFacingError):
    pass


class LockedJar(NamedTuple):
    group: str
    artifact: str
    version: str
    sha256: str
    size: int

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def path(self) -> str:
        """Where the jar sits in a Maven repository."""
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


def parse_lock(text: str, source: str = "the lock file") -> tuple[LockedJar, ...]:
    """`group:artifact:version sha256 bytes` per line; `#` starts a comment. `source` names
    the text in errors."""
    jars = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            coordinates, sha256, size = line.split()
            group, artifact, version = coordinates.split(":")
            jars.append(LockedJar(group, artifact, version, sha256.lower(), int(size)))
        except ValueError as error:
            raise DownloadError(f"{source} line {number}: cannot read {raw!r}") from error
    return tuple(jars)


def repository_url() -> str:
    return os.environ.get("DGM_MAVEN_REPOSITORY", MAVEN_CENTRAL).rstrip("/")


def fetch_jar(jar: LockedJar, folder: Path, repository: str) -> int:
    """Download one jar into folder, whole and verified or not at all; returns its size."""
    url = f"{repository}/{jar.path}"
    digest = hashlib.sha256()
    handle, temporary = tempfile.mkstemp(prefix=f".{jar.file_name}.", dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                    while chunk := response.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except (urllib.error.URLError, OSError) as error:
                raise DownloadError(
                    f"Could not download {url}: {error}. Is Maven Central reachable (set "
                    "HTTPS_PROXY if you need a proxy, or DGM_MAVEN_REPOSITORY for a mirror)?"
                ) from error
        if digest.hexdigest() != jar.sha256:
            raise DownloadError(
                f"Checksum mismatch for {url}: SHA-256 {digest.hexdigest()}, expected "
                f"{jar.sha256}, the pinned one. The file was discarded; "
                "a proxy or mirror may have altered it."
            )
        os.replace(temporary, folder / jar.file_name)
        return os.path.getsize(folder / jar.file_name)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def fetch_all(
    jars: Sequence[LockedJar],
    folder: Path,
    progress: Progress,
    repository: str | None = None,
    every_s: float = 2.0,
) -> None:
    """Fetch every jar into folder (a few at a time), telling progress every few seconds."""
    folder.mkdir(parents=True, exist_ok=True)
    source = repository or repository_url()
    total_bytes = sum(jar.size for jar in jars)
    done_files = done_bytes = 0
    last = time.monotonic()
    with ThreadPoolExecutor(max_workers=PARALLEL_DOWNLOADS) as pool:
        futures = [pool.submit(fetch_jar, jar, folder, source) for jar in jars]
        try:
            for future in as_completed(futures):
                done_bytes += future.result()
                done_files += 1
                now = time.monotonic()
                if now - last >= every_s or done_files == len(jars):
                    last = now
                    progress(_progress_line(done_files, len(jars), done_bytes, total_bytes))
        except BaseException:
            _cancel(futures)
            raise


def _progress_line(files: int, total_files: int, done: int, total: int) -> str:
    mb = 1024 * 1024
    return f"  ... {files}/{total_files} jars, {done / mb:.1f}/{total / mb:.1f} MB"


def _cancel(futures: Iterable[Future[int]]) -> None:
    for future in futures:
        future.cancel()
