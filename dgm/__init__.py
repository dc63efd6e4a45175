"""Delivery Guarantee Monitor: shared core (config, schemas, CLI, embedded broker, lab)."""

__version__ = "0.1.0"
