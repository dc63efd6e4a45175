"""The one table of Kafka client settings dgm passes on, and how each reaches its three clients.

`[cluster.client]` is written in librdkafka's names. confluent-kafka (librdkafka) takes it as
written; kafka-python (the group and transaction samplers, see collectors/group_requests.py)
and Spark's Java Kafka client (the audit) get the translation this table gives. A key whose
row is refused, or that has no row, stops the config load naming the key and the client that
cannot take it: no setting reaches one client and silently misses another.

Each row names what the key becomes in kafka-python (a KafkaAdminClient argument) and in the
Java client (a consumer property). Several keys become one Java property, composed below:
sasl.username/sasl.password and the OIDC credentials make `sasl.jaas.config`; a client
certificate's two PEM files become an inline PEM key store. The OIDC credentials become one
token provider object for kafka-python (dgm.clients.oidc).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dgm.clients.oidc import OidcClientCredentials

LIBRDKAFKA = "confluent-kafka (librdkafka)"
KAFKA_PYTHON = "kafka-python"
JAVA = "Spark's Java Kafka client"

# kafka-python gets one token provider for all the OIDC settings; Java gets them in JAAS.
TOKEN_PROVIDER = "sasl_oauth_token_provider"
JAAS = "sasl.jaas.config"
LOGIN_CALLBACK = "sasl.login.callback.handler.class"
# The Java client's PEM key store: the certificate chain and the key inline (files' content).
KEYSTORE_CHAIN = "ssl.keystore.certificate.chain"
KEYSTORE_KEY = "ssl.keystore.key"


@dataclass(frozen=True)
class Translation:
    """One librdkafka setting: the kafka-python argument and the Java property it becomes."""

    key: str
    kafka_python: str
    java: str
    # Why the key is refused, naming the client that cannot take it; "" when it is passed on.
    refused: str = ""


def _refuse(key: str, why: str) -> Translation:
    return Translation(key, "", "", why)


TABLE: tuple[Translation, ...] = (
    Translation("client.id", "client_id", "client.id"),
    Translation("security.protocol", "security_protocol", "security.protocol"),
    Translation("sasl.mechanism", "sasl_mechanism", "sasl.mechanism"),
    Translation("sasl.mechanisms", "sasl_mechanism", "sasl.mechanism"),
    Translation("sasl.username", "sasl_plain_username", JAAS),
    Translation("sasl.password", "sasl_plain_password", JAAS),
    Translation("sasl.oauthbearer.method", TOKEN_PROVIDER, LOGIN_CALLBACK),
    Translation("sasl.oauthbearer.client.id", TOKEN_PROVIDER, JAAS),
    Translation("sasl.oauthbearer.client.secret", TOKEN_PROVIDER, JAAS),
    Translation("sasl.oauthbearer.scope", TOKEN_PROVIDER, JAAS),
    Translation("sasl.oauthbearer.extensions", TOKEN_PROVIDER, JAAS),
    Translation(
        "sasl.oauthbearer.token.endpoint.url", TOKEN_PROVIDER, "sasl.oauthbearer.token.endpoint.url"
    ),
    Translation("ssl.ca.location", "ssl_cafile", "ssl.truststore.location"),
    Translation(
        "ssl.endpoint.identification.algorithm",
        "ssl_check_hostname",
        "ssl.endpoint.identification.algorithm",
    ),
    Translation("ssl.certificate.location", "ssl_certfile", KEYSTORE_CHAIN),
    Translation("ssl.key.location", "ssl_keyfile", KEYSTORE_KEY),
    Translation("ssl.key.password", "ssl_password", "ssl.key.password"),
    Translation("reconnect.backoff.ms", "reconnect_backoff_ms", "reconnect.backoff.ms"),
    Translation("reconnect.backoff.max.ms", "reconnect_backoff_max_ms", "reconnect.backoff.max.ms"),
    Translation("metadata.max.age.ms", "metadata_max_age_ms", "metadata.max.age.ms"),
    Translation("connections.max.idle.ms", "connections_max_idle_ms", "connections.max.idle.ms"),
    _refuse("ssl.ca.pem", f"{KAFKA_PYTHON} takes a CA file only: use ssl.ca.location"),
    _refuse(
        "ssl.certificate.pem",
        f"{KAFKA_PYTHON} takes a certificate file only: use ssl.certificate.location",
    ),
    _refuse("ssl.key.pem", f"{KAFKA_PYTHON} takes a key file only: use ssl.key.location"),
    _refuse(
        "ssl.keystore.location",
        f"{KAFKA_PYTHON} takes PEM files only: use ssl.certificate.location and ssl.key.location",
    ),
    _refuse("ssl.keystore.password", f"{KAFKA_PYTHON} takes PEM files only"),
    _refuse(
        "ssl.crl.location",
        f"{JAVA} has no certificate revocation list setting (only a JVM-wide one)",
    ),
    _refuse(
        "sasl.oauthbearer.config",
        "unsecured OAUTHBEARER tokens (sasl.oauthbearer.method = default) are for development "
        f"only and {KAFKA_PYTHON} has no unsecured token provider: use "
        'sasl.oauthbearer.method = "oidc"',
    ),
    *(
        _refuse(
            key,
            f"{KAFKA_PYTHON} authenticates with Kerberos only through the optional gssapi "
            "package and the default ticket cache, which cannot be given a keytab or principal "
            "to match the other two clients",
        )
        for key in (
            "sasl.kerberos.service.name",
            "sasl.kerberos.principal",
            "sasl.kerberos.keytab",
            "sasl.kerberos.kinit.cmd",
        )
    ),
)
BY_KEY: dict[str, Translation] = {row.key: row for row in TABLE}

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Every SASL mechanism librdkafka takes: anything else is a typo.
SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
OAUTH_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# kafka-clients 3.4 and later (Spark 4.0 brings 3.9): client credentials against the token URL.
OAUTH_LOGIN_CALLBACK = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
)
OIDC_REQUIRED = (
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
)
# Settings of Spark's consumer alone ([cluster.java_client]): it is the only client that
# fetches records, so these tune a fetch no other client makes. Nothing that decides how to
# reach or authenticate to the cluster.
JAVA_FETCH_TUNING = (
    "fetch.max.wait.ms",
    "fetch.min.bytes",
    "fetch.max.bytes",
    "max.partition.fetch.bytes",
    "receive.buffer.bytes",
    "max.poll.records",
    "request.timeout.ms",
    "default.api.timeout.ms",
)


def protocol(client: Mapping[str, str]) -> str:
    return client.get("security.protocol", "PLAINTEXT").upper()


def sasl_mechanism(client: Mapping[str, str]) -> str:
    """The SASL mechanism librdkafka will use (its default is GSSAPI)."""
    return client.get("sasl.mechanism", client.get("sasl.mechanisms", "GSSAPI")).upper()


def refusals(client: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """(key, why) for every setting of `client` that one of the three clients cannot take;
    the first reason only, per key."""
    seen: set[str] = set()
    for key, why in _refusals(client):
        if key not in seen:
            seen.add(key)
            yield key, why


def _refusals(client: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    for key in client:
        row = BY_KEY.get(key)
        if row is None:
            yield (
                key,
                (
                    f"{KAFKA_PYTHON} and {JAVA} cannot be given it: it is not one of the settings "
                    "dgm translates for them (docs/configuration.md, [cluster.client])"
                ),
            )
        elif row.refused:
            yield key, row.refused
    yield from _value_refusals(client)


def _value_refusals(client: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    used = protocol(client)
    if used not in SECURITY_PROTOCOLS:
        yield "security.protocol", f"expected one of {', '.join(SECURITY_PROTOCOLS)}"
        return
    if used.startswith("SASL_"):
        mechanism = sasl_mechanism(client)
        key = "sasl.mechanism" if "sasl.mechanism" in client else "sasl.mechanisms"
        if mechanism not in SASL_MECHANISMS:
            yield (
                key,
                (
                    f"Unsupported SASL mechanism: {mechanism} (expected one of "
                    f"{', '.join(SASL_MECHANISMS)})"
                ),
            )
        elif mechanism == "GSSAPI":
            yield key, BY_KEY["sasl.kerberos.keytab"].refused
        elif mechanism == "OAUTHBEARER":
            yield from _oauth_refusals(client)
        elif "sasl.username" not in client or "sasl.password" not in client:
            yield key, f"SASL {mechanism} needs sasl.username and sasl.password"
        if mechanism != "OAUTHBEARER":
            for oauth_key in (k for k in client if k.startswith("sasl.oauthbearer.")):
                yield oauth_key, "only for sasl.mechanism OAUTHBEARER"
    if client.get("ssl.ca.location") == "probe":
        yield (
            "ssl.ca.location",
            (
                f"'probe' (the system's CA locations) is librdkafka's alone: {KAFKA_PYTHON} and "
                f"{JAVA} need the CA file's path"
            ),
        )
    verify = client.get("ssl.endpoint.identification.algorithm", "https").lower()
    if verify not in ("https", "none"):
        yield "ssl.endpoint.identification.algorithm", "expected 'https' or 'none'"
    certificate = [k for k in ("ssl.certificate.location", "ssl.key.location") if k in client]
    if len(certificate) == 1:
        missing = ({"ssl.certificate.location", "ssl.key.location"} - set(certificate)).pop()
        yield certificate[0], f"a client certificate needs {missing} too"


def _oauth_refusals(client: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    method = client.get("sasl.oauthbearer.method", "default").lower()
    if method != "oidc":
        yield (
            "sasl.oauthbearer.method",
            (
                f"expected 'oidc' (client credentials from a token endpoint): librdkafka's "
                f"'default' makes unsecured tokens, which {KAFKA_PYTHON} cannot"
            ),
        )
        return
    for key in OIDC_REQUIRED:
        if not client.get(key):
            yield key, "missing: sasl.oauthbearer.method = 'oidc' needs it"
    for key in ("sasl.username", "sasl.password"):
        if key in client:
            yield key, "only for PLAIN and SCRAM; OAUTHBEARER uses sasl.oauthbearer.client.*"
    try:
        _extensions(client)
    except ValueError as error:
        yield "sasl.oauthbearer.extensions", str(error)


def _extensions(client: Mapping[str, str]) -> dict[str, str]:
    """sasl.oauthbearer.extensions (librdkafka: "key=value,key=value") as a dict."""
    found: dict[str, str] = {}
    text = client.get("sasl.oauthbearer.extensions", "").strip()
    for pair in text.split(",") if text else []:
        name, equals, value = pair.partition("=")
        if not equals or not name.strip().isalnum():
            raise ValueError("expected key=value[,key=value...] with alphanumeric keys")
        found[name.strip()] = value.strip()
    return found


def oidc_credentials(client: Mapping[str, str]) -> OidcClientCredentials | None:
    """The OIDC client credentials `client` says, None unless it uses OAUTHBEARER/oidc."""
    if not protocol(client).startswith("SASL_") or sasl_mechanism(client) != "OAUTHBEARER":
        return None
    return OidcClientCredentials(
        token_endpoint_url=client["sasl.oauthbearer.token.endpoint.url"],
        client_id=client["sasl.oauthbearer.client.id"],
        client_secret=client["sasl.oauthbearer.client.secret"],
        scope=client.get("sasl.oauthbearer.scope", ""),
        extensions=_extensions(client),
    )


def kafka_python_settings(client: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python KafkaAdminClient arguments for the librdkafka settings `client` (which
    passed `refusals`). An OIDC token provider comes as dgm.clients.oidc.OidcClientCredentials."""
    settings: dict[str, Any] = {}
    for key, value in client.items():
        name = BY_KEY[key].kafka_python
        if name == TOKEN_PROVIDER:
            settings[name] = oidc_credentials(client)
        elif name in ("security_protocol", "sasl_mechanism"):
            settings[name] = value.upper()
        elif name == "ssl_check_hostname":
            settings[name] = value.lower() != "none"
        elif name.endswith("_ms"):
            settings[name] = int(value)
        else:
            settings[name] = value
    return settings


def java_settings(client: Mapping[str, str]) -> dict[str, str]:
    """Java client properties (without Spark's "kafka." prefix) for the librdkafka settings
    `client` (which passed `refusals`). Reads a client certificate's PEM files: OSError when
    they cannot be read, ValueError when the key is not PKCS#8 (the Java client needs it)."""
    java: dict[str, str] = {}
    composed = {JAAS, LOGIN_CALLBACK, KEYSTORE_CHAIN, KEYSTORE_KEY}
    for key, value in client.items():
        name = BY_KEY[key].java
        if name in composed:
            continue
        if name == "ssl.endpoint.identification.algorithm":
            java[name] = "" if value.lower() == "none" else "https"
        elif name in ("security.protocol", "sasl.mechanism"):
            java[name] = value.upper()
        else:
            java[name] = value
    if "ssl.truststore.location" in java:
        java["ssl.truststore.type"] = "PEM"
    java.update(_java_login(client))
    if "ssl.certificate.location" in client:
        java.update(_java_key_store(client))
    return java


def _java_login(client: Mapping[str, str]) -> dict[str, str]:
    if not protocol(client).startswith("SASL_"):
        return {}
    mechanism = sasl_mechanism(client)
    credentials = oidc_credentials(client)
    if credentials is not None:
        options = {
            "clientId": credentials.client_id,
            "clientSecret": credentials.client_secret,
            **({"scope": credentials.scope} if credentials.scope else {}),
            **{f"extension_{k}": v for k, v in credentials.extensions.items()},
        }
        return {LOGIN_CALLBACK: OAUTH_LOGIN_CALLBACK, JAAS: _jaas(OAUTH_LOGIN_MODULE, options)}
    options = {"username": client["sasl.username"], "password": client["sasl.password"]}
    return {JAAS: _jaas(_LOGIN_MODULES[mechanism], options)}


def _jaas(module: str, options: Mapping[str, str]) -> str:
    quoted = " ".join(f'{name}="{_jaas_quoted(value)}"' for name, value in options.items())
    return f"{module} required {quoted};"


def _jaas_quoted(text: str) -> str:
    """A JAAS quoted-string body: backslashes and double quotes escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _java_key_store(client: Mapping[str, str]) -> dict[str, str]:
    """The client certificate as the Java client's PEM key store: the files' content inline,
    so executors on other hosts need no copy of them."""
    chain = Path(client["ssl.certificate.location"]).read_text()
    key = Path(client["ssl.key.location"]).read_text()
    if not any(f"-----BEGIN {kind}PRIVATE KEY-----" in key for kind in ("", "ENCRYPTED ")):
        raise ValueError(
            f"ssl.key.location: {JAVA} reads PKCS#8 keys only (BEGIN PRIVATE KEY or BEGIN "
            "ENCRYPTED PRIVATE KEY); convert it with `openssl pkcs8 -topk8`"
        )
    return {"ssl.keystore.type": "PEM", KEYSTORE_CHAIN: chain, KEYSTORE_KEY: key}


def java_client_refusals(java_client: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """(key, why) for `[cluster.java_client]` keys other than Spark's fetch tuning."""
    for key in java_client:
        if key not in JAVA_FETCH_TUNING:
            yield (
                key,
                (
                    "only Spark's fetch tuning belongs here ("
                    + ", ".join(JAVA_FETCH_TUNING)
                    + "); settings that reach the cluster go in [cluster.client], in librdkafka's "
                    "names, from which all three clients get them"
                ),
            )
