"""Spark jobs: audit records from Kafka and analyze them into verdicts."""
