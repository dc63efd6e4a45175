"""Embedded Apache Kafka (KRaft) for tests, CI and the demo."""
