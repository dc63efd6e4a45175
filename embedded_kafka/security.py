"""The embedded broker with authentication and authorization: a SASL listener, ACLs enforced.

With a `SaslSetup` the cluster adds a SASL_PLAINTEXT listener (SCRAM-SHA-256 and -512, and
OAUTHBEARER when a JWKS file is given: tokens are checked against its keys) and Kafka's KRaft
authorizer (StandardAuthorizer). The admin is a super user whose SCRAM credential is written
into the storage when it is formatted (a KRaft cluster has no other way to its first user);
other users are created through the admin API, as `kafka-configs --alter --add-config
SCRAM-SHA-256=[...]` does. The PLAINTEXT, FAULT and CONTROLLER listeners keep serving the
brokers themselves, as the ANONYMOUS super user: it is a loopback cluster, and this keeps
the controller quorum free of credentials.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from dgm.util.errors import UserFacingError

SASL_LISTENER = "SASL"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_OAUTH_VALIDATOR = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
)
_OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
# Kafka 4 reads token keys only from URLs this JVM property lists.
ALLOWED_URLS_PROPERTY = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
# The audience ("aud") and issuer ("iss") an OAUTHBEARER token must name: Kafka 4.4's
# validator refuses to start without both to check (or an explicit opt-out), and every
# version checks them when set.
TOKEN_AUDIENCE = "dgm-embedded-kafka"
TOKEN_ISSUER = "dgm-embedded-kafka-issuer"
TIMEOUT_S = 30.0


class SecurityError(UserFacingError):
    pass


@dataclass(frozen=True)
class SaslSetup:
    """How the SASL listener authenticates: the admin's SCRAM credential, and the keys that
    sign OAUTHBEARER tokens (a JWKS file), if OAUTHBEARER is wanted."""

    admin_password: str
    admin_user: str = "admin"
    jwks_file: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "admin_user": self.admin_user,
            "admin_password": self.admin_password,
            "jwks_file": str(self.jwks_file) if self.jwks_file else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SaslSetup:
        jwks = data.get("jwks_file")
        return cls(
            str(data["admin_password"]), str(data["admin_user"]), Path(jwks) if jwks else None
        )

    def mechanisms(self) -> tuple[str, ...]:
        return (*SCRAM_MECHANISMS, *(("OAUTHBEARER",) if self.jwks_file else ()))

    def jvm_properties(self) -> dict[str, str]:
        if self.jwks_file is None:
            return {}
        return {ALLOWED_URLS_PROPERTY: self.jwks_file.absolute().as_uri()}

    def format_arguments(self) -> list[str]:
        """kafka-storage format arguments that write the admin's SCRAM credentials."""
        return [
            argument
            for mechanism in SCRAM_MECHANISMS
            for argument in (
                "--add-scram",
                f"{mechanism}=[name={self.admin_user},password={self.admin_password}]",
            )
        ]

    def admin_config(self, sasl_bootstrap_servers: str) -> dict[str, Any]:
        """librdkafka settings of the admin super user on the SASL listener."""
        return scram_config(sasl_bootstrap_servers, self.admin_user, self.admin_password)


def server_properties(setup: SaslSetup) -> dict[str, str]:
    """Broker properties beyond the listener itself (added to listeners by properties.py)."""
    props = {
        "sasl.enabled.mechanisms": ",".join(setup.mechanisms()),
        "authorizer.class.name": AUTHORIZER,
        "super.users": f"User:{setup.admin_user};User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }
    for mechanism in SCRAM_MECHANISMS:
        props[f"listener.name.sasl.{mechanism.lower()}.sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        )
    if setup.jwks_file is not None:
        props["listener.name.sasl.oauthbearer.sasl.jaas.config"] = f"{_OAUTH_LOGIN} required;"
        props["listener.name.sasl.oauthbearer.sasl.server.callback.handler.class"] = (
            _OAUTH_VALIDATOR
        )
        props["sasl.oauthbearer.jwks.endpoint.url"] = setup.jwks_file.absolute().as_uri()
        props["sasl.oauthbearer.expected.audience"] = TOKEN_AUDIENCE
        props["sasl.oauthbearer.expected.issuer"] = TOKEN_ISSUER
    return props


def scram_config(bootstrap_servers: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": user,
        "sasl.password": password,
    }


def create_scram_user(admin: AdminClient, user: str, password: str) -> None:
    """A SCRAM-SHA-256 and -512 credential for `user` (the admin API of kafka-configs)."""
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        # One credential of a user per request: Kafka refuses two (DUPLICATE_RESOURCE).
        upsert: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(mechanism, 4096), password.encode()
            )
        ]
        for future in admin.alter_user_scram_credentials(upsert).values():
            future.result(timeout=TIMEOUT_S)


@dataclass(frozen=True)
class Acl:
    """An ALLOW rule for a principal: operation on a resource (a literal name, or a prefix)."""

    principal: str
    resource: ResourceType
    name: str
    operation: AclOperation
    prefixed: bool = False

    def binding(self) -> AclBinding:
        pattern = ResourcePatternType.PREFIXED if self.prefixed else ResourcePatternType.LITERAL
        return AclBinding(
            self.resource, self.name, pattern, self.principal, "*", self.operation,
            AclPermissionType.ALLOW,
        )  # fmt: skip

    def filter(self) -> AclBindingFilter:
        pattern = ResourcePatternType.PREFIXED if self.prefixed else ResourcePatternType.LITERAL
        return AclBindingFilter(
            self.resource, self.name, pattern, self.principal, "*", self.operation,
            AclPermissionType.ALLOW,
        )  # fmt: skip


def grant(admin: AdminClient, acls: Iterable[Acl]) -> None:
    bindings = [acl.binding() for acl in acls]
    if bindings:
        for future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).values():
            future.result(timeout=TIMEOUT_S)


def revoke(admin: AdminClient, acls: Iterable[Acl]) -> None:
    filters = [acl.filter() for acl in acls]
    if filters:
        for future in admin.delete_acls(filters, request_timeout=TIMEOUT_S).values():
            future.result(timeout=TIMEOUT_S)
