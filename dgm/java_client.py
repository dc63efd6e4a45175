"""Java client settings for Spark's Kafka source, derived from librdkafka's when that is exact.

dgm's Python clients take `[cluster.client]` (librdkafka); Spark's Kafka source is a Java
client and takes `[cluster.java_client]`. When the latter is empty, the cases that translate
one to one are derived: SASL PLAIN or SCRAM with username and password, TLS with a PEM CA file
(`ssl.ca.location`) or the JVM's default trust store, host name verification on or off.
Anything else (GSSAPI, OAUTHBEARER, client certificates, a CA directory) needs java_client
written by hand; `derive` says why instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping

_SECURE = ("SSL", "SASL_SSL", "SASL_PLAINTEXT")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Every SASL mechanism librdkafka takes: anything else is a typo, not a case to derive.
SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# librdkafka settings for a client certificate: Java wants them as a key store.
_CLIENT_CERTIFICATE = (
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
    "ssl.keystore.location",
)


def needs_java_client(client: Mapping[str, str]) -> bool:
    """True when the librdkafka settings use SASL or TLS."""
    return client.get("security.protocol", "PLAINTEXT").upper() in _SECURE


def sasl_mechanism(client: Mapping[str, str]) -> str:
    """The SASL mechanism librdkafka will use (its default is GSSAPI)."""
    return client.get("sasl.mechanism", client.get("sasl.mechanisms", "GSSAPI")).upper()


def derive(client: Mapping[str, str]) -> tuple[dict[str, str] | None, str]:
    """(Java settings, "") equivalent to the librdkafka `client`, or (None, why not)."""
    protocol = client.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in _SECURE:
        return {}, ""
    java = {"security.protocol": protocol}
    if protocol.startswith("SASL_"):
        mechanism = sasl_mechanism(client)
        if mechanism not in _LOGIN_MODULES:
            return None, f"SASL mechanism {mechanism} is not derived"
        if "sasl.username" not in client or "sasl.password" not in client:
            return None, f"SASL {mechanism} without sasl.username and sasl.password"
        java["sasl.mechanism"] = mechanism
        java["sasl.jaas.config"] = (
            f"{_LOGIN_MODULES[mechanism]} required "
            f'username="{_jaas_quoted(client["sasl.username"])}" '
            f'password="{_jaas_quoted(client["sasl.password"])}";'
        )
    if protocol in ("SSL", "SASL_SSL"):
        certificate = [key for key in _CLIENT_CERTIFICATE if key in client]
        if certificate:
            return None, f"a client certificate ({certificate[0]}) is not derived"
        if "ssl.ca.pem" in client:
            return None, "ssl.ca.pem is not derived (use ssl.ca.location)"
        ca = client.get("ssl.ca.location")
        if ca is not None:
            if ca == "probe":
                return None, "ssl.ca.location = 'probe' is not derived"
            java["ssl.truststore.type"] = "PEM"
            java["ssl.truststore.location"] = ca
        verify = client.get("ssl.endpoint.identification.algorithm", "https").lower()
        if verify == "none":
            java["ssl.endpoint.identification.algorithm"] = ""
    return java, ""


def _jaas_quoted(text: str) -> str:
    """A JAAS quoted-string body: backslashes and double quotes escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
