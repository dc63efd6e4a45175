"""Alerting: what a rule says, the metrics rules name, the store of rules and states."""
