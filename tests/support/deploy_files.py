"""The files under deploy/ that the exporter's tests check: the Grafana dashboard and the
Prometheus alert rules."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dgm.json"
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
