"""Kafka clients: one set of settings for every client dgm speaks through, and its rights."""
