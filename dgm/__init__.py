"""Delivery Guarantee Monitor: the core, in rooms (docs/design.md, "Layout").

config/ (dgm.toml), contracts/ (the formats the stages exchange), alerting/ (rules, metrics,
store), clients/ (Kafka client settings and rights), util/ (small helpers). The CLI is
`shell/`, the embedded broker `embedded_kafka/`, the reference pipelines `lab/`.
"""

__version__ = "0.1.0"
