"""The audit's Kafka reads (spark_jobs/audit/kafka_source.py): the group id that lets the
executors' consumer pool reuse a partition's consumer from cycle to cycle, and never hand
one cluster's or isolation level's consumer to another read."""

from __future__ import annotations

from spark_jobs.audit.kafka_source import audit_group

SECRET = "s3cret-password"
A = {
    "kafka.bootstrap.servers": "a:9092",
    "kafka.sasl.jaas.config": f'... password="{SECRET}";',
}
B = {**A, "kafka.bootstrap.servers": "b:9092"}


def test_the_group_is_stable_per_cluster_and_isolation_level() -> None:
    assert audit_group(A, "read_committed") == audit_group(dict(A), "read_committed")
    groups = {
        audit_group(A, "read_committed"),
        audit_group(A, "read_uncommitted"),  # the pool must not mix isolation levels
        audit_group(B, "read_committed"),  # nor clusters: its key is (group, partition)
        audit_group({"kafka.bootstrap.servers": "a:9092"}, "read_committed"),  # other settings
    }
    assert len(groups) == 4


def test_no_secret_reaches_the_group_id() -> None:
    other_password = {**A, "kafka.sasl.jaas.config": '... password="another";'}
    # The id is made of the servers, the isolation level and the settings' names only.
    assert audit_group(A, "read_committed") == audit_group(other_password, "read_committed")
    assert SECRET not in audit_group(A, "read_committed")
