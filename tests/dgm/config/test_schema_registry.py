"""[cluster.schema_registry]: parsed per cluster, secrets redacted, malformed values refused
naming the file and the key (never echoing a secret)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dgm.config.problems import ConfigError
from dgm.config.schema_registry import SchemaRegistryConfig
from tests.support.config_text import load_text

SECRET = "pa55-word-never-shown"


def test_basic_auth_per_cluster_is_parsed_and_redacted(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not read at load time")
    config = load_text(
        tmp_path,
        f"""
[cluster.schema_registry]
url = "https://registry.example:8443/apis/ccompat/v7"
username = "dgm"
password = "{SECRET}"
ca_file = "ca.pem"
timeout_s = 3
retries = 1

[clusters.west]
bootstrap_servers = "west:9092"
[clusters.west.schema_registry]
url = "http://west-registry:8081"
bearer_token = "{SECRET}"
verify = false
""",
    )
    registry = config.cluster.schema_registry
    assert registry is not None
    assert (registry.username, registry.password) == ("dgm", SECRET)
    assert registry.ca_file == tmp_path / "ca.pem"  # relative to the file, like every path
    assert (registry.timeout_s, registry.retries, registry.verify) == (3.0, 1, True)
    assert registry.api_url() == "https://registry.example:8443/apis/registry/v3"
    west = config.clusters["west"].schema_registry
    assert west is not None
    assert (west.bearer_token, west.verify, west.api_url()) == (SECRET, False, None)
    for shown in (repr(config.cluster), repr(config.clusters["west"]), repr(config)):
        assert SECRET not in shown
    assert "password='***'" in repr(registry)
    assert "bearer_token='***'" in repr(west)


def test_a_cluster_without_a_registry_has_none(tmp_path: Path) -> None:
    config = load_text(tmp_path, '[cluster]\nbootstrap_servers = "b:9092"\n')
    assert config.cluster.schema_registry is None


def test_apicurio_url_is_taken_as_given() -> None:
    config = SchemaRegistryConfig(
        url="http://r:8081", apicurio_url="http://apicurio:8080/apis/registry/v3/"
    )
    assert config.api_url() == "http://apicurio:8080/apis/registry/v3"


@pytest.mark.parametrize(
    ("table", "key", "says"),
    [
        ('url = "registry:8081"', "url", "http:// or https:// URL"),
        ('url = "ftp://registry"', "url", "http:// or https:// URL"),
        (f'url = "http://dgm:{SECRET}@registry:8081"', "url", "credentials in the URL"),
        ('url = "http://r:8081"\nusername = "dgm"', "password", "needs both"),
        (f'url = "http://r:8081"\npassword = "{SECRET}"', "username", "needs both"),
        (
            f'url = "http://r:8081"\nusername = "u"\npassword = "{SECRET}"\n'
            f'bearer_token = "{SECRET}"',
            "bearer_token",
            "not both",
        ),
        ('url = "http://r:8081"\ncert_file = "c.pem"', "key_file", "needs both"),
        ('url = "http://r:8081"\ntimeout_s = 0', "timeout_s", "> 0"),
        ('url = "http://r:8081"\nretries = -1', "retries", "0 or more"),
        ('url = "http://r:8081"\npassword = 12345678', "password", "expected a string, got int"),
        ('url = "http://r:8081"\nverify = "no"', "verify", "expected a boolean"),
        ('url = "http://r:8081"\nuser = "dgm"', "user", "unknown key (did you mean 'username'?)"),
        ('username = "dgm"', "url", "missing required key"),
    ],
)
def test_a_malformed_value_is_refused_naming_file_and_key(
    tmp_path: Path, table: str, key: str, says: str
) -> None:
    (tmp_path / "c.pem").write_text("")
    with pytest.raises(ConfigError) as refused:
        load_text(tmp_path, f"[cluster.schema_registry]\n{table}\n")
    message = str(refused.value)
    assert message.startswith(f"dgm.toml: cluster.schema_registry.{key}: "), message
    assert says in message
    assert SECRET not in message
    assert "12345678" not in message


def test_a_named_cluster_s_registry_is_checked_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        load_text(
            tmp_path,
            '[clusters.west]\nbootstrap_servers = "w:9092"\n'
            '[clusters.west.schema_registry]\nurl = "west-registry"\n',
        )
    assert str(refused.value).startswith("dgm.toml: clusters.west.schema_registry.url: ")


def test_the_password_may_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REGISTRY_PASSWORD", SECRET)
    config = load_text(
        tmp_path,
        '[cluster.schema_registry]\nurl = "http://r:8081"\nusername = "dgm"\n'
        'password = "${REGISTRY_PASSWORD}"\n',
    )
    assert config.cluster.schema_registry is not None
    assert config.cluster.schema_registry.password == SECRET
