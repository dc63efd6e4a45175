"""docs/metrics.md lists every metric family the exporter declares (exporter/families.py),
with its labels, and every alert metric (`dgm/alerting/metrics.py`'s ALERT_METRICS), with the
kinds of subject it is measured per; and nothing that is no longer declared, but for the
renamed families' old names, which must no longer be served."""

from __future__ import annotations

import re
from pathlib import Path

from dgm.alerting.metrics import ALERT_METRICS
from exporter.families import FAMILIES

PAGE = Path(__file__).resolve().parents[1] / "docs" / "metrics.md"


RENAMED = "| old name | now |"


def rows(header: str) -> dict[str, list[str]]:
    """First-column name -> the row's cells, from every table whose header is `header`."""
    found: dict[str, list[str]] = {}
    in_table = False
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if line.strip() == header:
            in_table = True
        elif in_table and line.startswith("|") and not line.startswith("|---"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            name = re.fullmatch(r"`([^`{]+)(?:\{[^`]*\})?`", cells[0])
            assert name, f"the first column holds one backticked name, got {cells[0]!r}"
            assert name[1] not in found, f"{name[1]} is listed twice"
            found[name[1]] = cells
        elif not line.startswith("|"):
            in_table = False
    return found


def test_every_exporter_family_is_documented_with_its_labels() -> None:
    documented = rows("| metric | labels | meaning |")
    declared = {family.name: family for family in FAMILIES}
    assert set(documented) == set(declared), (
        f"not documented: {set(declared) - set(documented)}; "
        f"no longer declared: {set(documented) - set(declared)}"
    )
    for name, family in declared.items():
        labels = ", ".join(f"`{label}`" for label in family.labels) or "—"
        assert documented[name][1] == labels, f"{name}: labels {documented[name][1]!r}"


def test_every_alert_metric_is_documented_with_its_subjects() -> None:
    documented = rows("| alert metric | measured per | meaning |")
    assert set(documented) == set(ALERT_METRICS), (
        f"not documented: {set(ALERT_METRICS) - set(documented)}; "
        f"no longer declared: {set(documented) - set(ALERT_METRICS)}"
    )
    for name, kinds in ALERT_METRICS.items():
        assert documented[name][1] == ", ".join(kinds), f"{name}: {documented[name][1]!r}"


def test_every_family_name_on_the_page_is_served() -> None:
    served = {family.name for family in FAMILIES}
    renamed = rows(RENAMED)
    named = set(re.findall(r"`(dgm_[a-z_]+)`", PAGE.read_text(encoding="utf-8"))) - set(renamed)
    assert named <= served, f"named on the page, not served: {named - served}"


def test_renamed_families_are_gone_and_their_new_names_served() -> None:
    served = {family.name for family in FAMILIES}
    renamed = rows(RENAMED)
    assert renamed, "the page lists the renamed families"
    for old, cells in renamed.items():
        new = set(re.findall(r"`(dgm_[a-z_]+)", cells[1]))
        assert new and new <= served, f"{old} -> {cells[1]}: {new - served} not served"
        if old not in new:  # a family that kept its name but changed its labels
            assert old not in served, f"{old} is listed as renamed but still served"
