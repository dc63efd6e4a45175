"""Delivery Guarantee Monitor: the shared core (config, the formats the stages exchange, what
the commands share)."""

__version__ = "0.1.0"
