"""Delivery Guarantee Monitor: the core.

Configuration, errors, the formats the stages exchange (samples, fingerprints, published
tables, record headers, alert rules and store), what the subcommands share (`command_line`)
and small shared helpers. The CLI is `shell/`, the embedded broker `embedded_kafka/`, the
reference pipelines `lab/`; docs/design.md has the layers.
"""

__version__ = "0.1.0"
