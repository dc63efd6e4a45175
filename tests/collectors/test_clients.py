from __future__ import annotations

import pytest

from collectors.clients import Clients, check_bootstrap, kafka_python_config, scrub
from dgm.config import ConfigError


@pytest.mark.parametrize("servers", ["localhost:9092", "a:1,b:2", "[::1]:9092", "10.0.0.1:19092"])
def test_good_bootstrap_addresses(servers: str) -> None:
    check_bootstrap(servers)


@pytest.mark.parametrize("servers", ["localhost", "host:port", "a:1,,b:2", "a:0", "a:99999", ""])
def test_bad_bootstrap_addresses_are_named(servers: str) -> None:
    with pytest.raises(ConfigError, match="expected host:port"):
        check_bootstrap(servers)


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


def test_settings_librdkafka_rejects_are_a_config_error_without_the_secret() -> None:
    settings = {
        "bootstrap.servers": "127.0.0.1:9",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAN",
        "sasl.password": "hunter2",
    }
    with pytest.raises(ConfigError, match="Unsupported SASL mechanism: PLAN") as error:
        Clients(settings, request_timeout_s=1)
    assert "hunter2" not in str(error.value)
