from __future__ import annotations

from dgm.clients.kafka_python import kafka_python_config, scrub


def test_scrub_hides_secret_values_only() -> None:
    settings = {"sasl.username": "alice", "sasl.password": "hunter2"}
    assert scrub("user alice failed with hunter2", settings) == "user alice failed with ***"


def test_kafka_python_gets_the_same_security_settings() -> None:
    config = kafka_python_config(
        {
            "bootstrap.servers": "k:9093",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "hunter2",
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.endpoint.identification.algorithm": "none",
        },
        request_timeout_s=7,
    )
    assert config == {
        "bootstrap_servers": "k:9093",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": "hunter2",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_check_hostname": False,
        "request_timeout_ms": 7000,
        "bootstrap_timeout_ms": 7000,
        "client_id": "dgm-collectors",
    }
