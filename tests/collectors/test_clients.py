from __future__ import annotations

import pytest

from collectors.clients import Clients, check_bootstrap
from dgm.config.problems import ConfigError


@pytest.mark.parametrize("servers", ["localhost:9092", "a:1,b:2", "[::1]:9092", "10.0.0.1:19092"])
def test_good_bootstrap_addresses(servers: str) -> None:
    check_bootstrap(servers)


@pytest.mark.parametrize("servers", ["localhost", "host:port", "a:1,,b:2", "a:0", "a:99999", ""])
def test_bad_bootstrap_addresses_are_named(servers: str) -> None:
    with pytest.raises(ConfigError, match="expected host:port"):
        check_bootstrap(servers)


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
