"""The batches a processor was killed in the middle of, read back from the processors'
transcripts (`<time> <pid> <line>`, lab.child_process): each batch's `claimed` lines
(lab.processors.position_file's format; a share-group relay says a batch in several, one
per run of offsets) and the phase its kill came after (lab.supervisor)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.processors.position_file import parse_claim
from lab.supervisor import Crash


@dataclass(frozen=True)
class KilledBatch:
    """A batch (one `claimed` line of it) whose process was killed right after one of its
    two steps."""

    pid: int
    batch: int
    spans: dict[int, tuple[int, int]]  # source partition -> [first, end) offsets


def transcript_lines(log_dir: Path) -> list[tuple[int, str]]:
    """(pid, line) of every processor transcript in `log_dir`."""
    found = []
    for transcript in sorted(log_dir.glob("*.out")):
        for line in transcript.read_text().splitlines():
            _, pid, said = line.split(" ", 2)
            found.append((int(pid), said))
    return found


def killed_batches(crashes: list[Crash], log_dir: Path, phase: str) -> list[KilledBatch]:
    """The claimed batches of the `crashes` that came right after `phase` was announced."""
    killed = {(c.pid, c.batch) for c in crashes if c.phase == phase}
    found = []
    for pid, said in transcript_lines(log_dir):
        claim = parse_claim(said)
        if claim is not None and (pid, claim[0]) in killed:
            found.append(KilledBatch(pid, claim[0], claim[1]))
    return found


def spanned(batches: list[KilledBatch]) -> int:
    """How many source offsets the batches hold."""
    return sum(end - first for b in batches for first, end in b.spans.values())
