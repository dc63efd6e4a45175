"""`dgm verdicts` over the hand-made publication: the table and the JSON carry each
pipeline's truncated records and inconsistent offsets."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from dgm.published import verdicts_document
from shell.verdicts_command import format_table, read_verdicts
from tests.dashboard.published import build


def test_verdicts_show_the_log_integrity_counts(tmp_path: Path) -> None:
    build(tmp_path)
    rows, finished, _, _ = read_verdicts(tmp_path)
    lines = format_table(rows).splitlines()
    header = lines[0].split()
    at = header.index("truncated")
    assert header[at : at + 4] == ["truncated", "inconsistent", "faults", "evidence"]
    payments = next(line for line in lines if line.startswith("payments-eos"))
    # truncated, inconsistent, faults, evidence
    assert re.search(r" 2 +1 +4 +tested ", payments), payments
    document = json.loads(
        json.dumps(verdicts_document(rows, finished, 60.0, datetime.now(UTC), []), default=str)
    )
    by_name = {p["pipeline"]: p for p in document["pipelines"]}
    assert (
        by_name["payments-eos"]["truncated_records"],
        by_name["payments-eos"]["inconsistent_offsets"],
    ) == (2, 1)
