"""Delivery Guarantee Monitor: the core.

Configuration, errors, the formats the stages exchange (samples, fingerprints, published
tables, record headers, alert rules and store) and small shared helpers. The CLI is `shell/`,
the reference pipelines `lab/`; docs/design.md has the layers.
"""

__version__ = "0.1.0"
