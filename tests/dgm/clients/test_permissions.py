"""The ACL table: dgm/clients/permissions.py and docs/configuration.md say the same, and a refusal
is said one way."""

from __future__ import annotations

from pathlib import Path

from dgm.clients.permissions import (
    CLUSTER_DESCRIBE_CONFIGS,
    PERMISSIONS,
    TOPIC_READ,
    TRANSACTIONAL_ID_DESCRIBE,
    Denial,
)

PAGE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def page_rows() -> list[list[str]]:
    section = PAGE.read_text().split("### Permissions (ACLs)", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")][1:]  # no header
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_page_shows_each_permission_and_no_other() -> None:
    rows = page_rows()
    assert len(rows) == len(PERMISSIONS)
    for permission, (operation, resource, used_for) in zip(PERMISSIONS, rows, strict=True):
        optional = " (optional)" if permission.optional else ""
        assert operation == permission.operation + optional
        assert permission.resource in resource
        assert used_for == permission.used_for


def test_a_denial_names_what_is_hidden_and_the_permission() -> None:
    assert Denial(TOPIC_READ, "orders").line() == (
        "cannot see the records and producers of topic orders: missing permission Read on "
        "topic orders"
    )
    assert Denial(CLUSTER_DESCRIBE_CONFIGS).line() == (
        "cannot see the brokers' transaction.max.timeout.ms: missing permission "
        "DescribeConfigs on cluster"
    )
    assert "--operation Describe --transactional-id tx-1" in Denial(
        TRANSACTIONAL_ID_DESCRIBE, "tx-1"
    ).fix("dgm")
