"""`dgm verdicts`: what each pipeline achieves, read from the published DuckDB file.

Exit codes: 0 every pipeline meets what it declares (or has no verdict yet), 1 a pipeline
violates its declaration, 3 the publication is stale: its analysis finished more than
max(3 x (analysis.interval_s + the run's duration), 60 s) ago
(dgm.contracts.published.stale_after_s,
the exporter's and the dashboard's threshold too), so `dgm analyze` has probably stopped (3
wins over 1: the verdicts shown may no longer hold), 2 an error (no publication, bad config).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from dgm.config.loader import load_config
from dgm.contracts import published
from dgm.contracts.published import (
    PUBLISHED_FILE,
    open_read_only,
    run_duration_s,
    stale_after_s,
    verdicts_document,
)
from dgm.contracts.published_views import read_missing_capabilities, read_missing_permissions
from dgm.util.errors import UserFacingError

# What the table prints, in order: (column, heading).
_SHOWN = (
    ("pipeline", "pipeline"),
    ("declared", "declared"),
    ("achieved", "achieved"),
    ("meets", "meets"),
    ("records_checked", "records"),
    ("filtered", "filtered"),
    ("duplicate_copies", "duplicates"),
    ("causes_shown", "by cause"),
    ("lost", "lost"),
    ("aborted_reads", "aborted reads"),
    ("beyond_retention", "beyond retention"),
    ("late_records", "late"),
    ("truncated_records", "truncated"),
    ("inconsistent_offsets", "inconsistent"),
    ("faults_observed", "faults"),
    ("evidence", "evidence"),
    ("claim_shown", "claim"),
    ("sample_shown", "ids kept"),
    ("torn_commits", "torn commits"),
    ("producer_out_of_order", "out of order (producer)"),
    ("sink_out_of_order", "out of order (sink)"),
)


def register(commands: Any) -> None:
    verdicts = commands.add_parser(
        "verdicts",
        help="print each pipeline's declared and achieved delivery semantic",
        description="Per pipeline, from the last published analysis: declared and achieved "
        "semantic, records checked, duplicates, lost ids, aborted reads, faults observed, and "
        "whether it meets what it declares. Exits 1 when a pipeline violates its declaration, "
        "3 when the publication is older than max(3 x (analysis.interval_s + the run's "
        "duration), 60 s) (stale: is `dgm analyze` running?), 2 on errors.",
    )
    verdicts.add_argument("--json", action="store_true", help="one JSON document")
    verdicts.set_defaults(handler=_verdicts)


def read_verdicts(
    state_dir: Path,
) -> tuple[list[dict[str, Any]], datetime | None, float, list[str], list[str]]:
    """The verdict rows, when their analysis finished, how long it ran (seconds) and what dgm
    cannot see for want of a permission, and of a capability of the brokers; UserFacingError
    if none exist yet."""
    path = state_dir / PUBLISHED_FILE
    if not path.exists():
        raise UserFacingError(
            f"no analysis published yet ({path} does not exist): run `dgm analyze --once` "
            "(with `dgm collect` running), or `dgm demo`"
        )
    try:
        with open_read_only(path) as db:
            rows, finished = published.read_verdicts(db)
            missing, gaps = read_missing_permissions(db), read_missing_capabilities(db)
            return rows, finished, run_duration_s(db), missing, gaps
    except (duckdb.Error, OSError) as error:
        raise UserFacingError(f"cannot read {path}: {error}") from None


EXIT_VIOLATION = 1
EXIT_STALE = 3


def _meets(row: dict[str, Any]) -> str:
    meets = row["meets_declared"]
    return "n/a" if meets is None else "yes" if meets else "NO"


def _cell(row: dict[str, Any], column: str) -> str:
    if column == "meets":
        return _meets(row)
    if column == "sample_shown":
        one_in = row.get("sample_one_in") or 1
        return "all" if one_in == 1 else f"1 in {one_in}"
    if column == "causes_shown":
        causes = row.get("duplicate_causes") or {}
        return ", ".join(f"{cause} {copies}" for cause, copies in causes.items())
    if column == "claim_shown":
        claim, detail = row.get("claim"), row.get("claim_detail")
        return "" if claim is None else f"{claim} ({detail})" if detail else str(claim)
    value = row.get(column)  # a publication of an older dgm may lack a newer column
    return "" if value is None else str(value)


def _percent(value: float | None) -> str:
    return "?" if value is None else f"{100 * value:.3g}%"


def sampled_rates(rows: list[dict[str, Any]]) -> list[str]:
    """A line per sampled pipeline: its rates are estimates, with their 95% intervals."""
    lines = []
    for row in rows:
        one_in = row.get("sample_one_in") or 1
        if one_in == 1:
            continue
        rates = [
            f"{name} rate {_percent(row[rate])} (95%: {_percent(row[f'{rate}_low'])} to "
            f"{_percent(row[f'{rate}_high'])})"
            for name, rate in (("duplicate", "duplicate_rate"), ("loss", "loss_rate"))
            if row.get(rate) is not None
        ]
        told = ", ".join(rates) or "nothing checked yet"
        lines.append(f"{row['pipeline']}: counts of 1 in {one_in} message ids; {told}")
    return lines


def format_table(rows: list[dict[str, Any]]) -> str:
    cells = [[heading for _, heading in _SHOWN]]
    cells += [[_cell(row, column) for column, _ in _SHOWN] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(_SHOWN))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def _verdicts(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    rows, finished, run_s, missing, gaps = read_verdicts(config.state_dir)
    stale_after = stale_after_s(config.analysis.interval_s, run_s)
    document = verdicts_document(rows, finished, stale_after, datetime.now(UTC), missing, gaps)
    age, stale = document["age_s"], document["stale"]
    if args.json:
        print(json.dumps(document, default=str, indent=2))
    else:
        if not rows:
            print("no pipelines analyzed: add [[pipelines]] to dgm.toml (or run `dgm lab run`)")
        else:
            print(format_table(rows))
            for line in sampled_rates(rows):
                print(line)
            print(f"analyzed at {finished:%Y-%m-%d %H:%M:%S %Z}" if finished else "")
        # What dgm cannot see weakens every verdict that needs it: said after the table.
        for line in [*missing, *gaps]:
            print(line)
    if stale:
        print(
            f"dgm: stale: the last analysis finished {age:.0f} s ago, more than "
            f"{stale_after:.0f} s (3 x (analysis.interval_s + the run's {run_s:.0f} s), at "
            "least 60 s): is `dgm analyze` running?",
            file=sys.stderr,
        )
        return EXIT_STALE
    return EXIT_VIOLATION if any(row["meets_declared"] is False for row in rows) else 0
