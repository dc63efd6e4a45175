"""The exporter stage: the published analysis as Prometheus metrics and a read-only JSON API.

`dgm exporter` serves `/metrics` (read from `<state_dir>/dgm.duckdb` at every scrape) and
`/api/v1/...` on one HTTP server; it only reads what `dgm analyze` publishes and what the
collectors sample.
"""
