"""Pipelines whose consumer is a share group (KIP-932), and the words their evidence takes
(docs/design.md, "Share groups").

The collectors sample a share group's share-partition start offsets where a consumer group's
committed offsets go (group_offsets, `group_type` 'share'), so the group claim reads them
unchanged: every record below a start offset is acknowledged or archived, and must be in the
sink. What differs is how the evidence is named. A share group does not re-read a record
because of an offset: it delivers it again. So a duplicate the rules name reprocessing is a
**redelivery**, and a lost record is one the group **acknowledged or archived**.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dgm.config.document import DgmConfig
from dgm.contracts.vocabulary import DuplicateCause, GroupType, LossCause

REDELIVERED = "the share group delivered the record again"


def share_group_pipelines(config: DgmConfig, group_offsets: pa.Table) -> frozenset[str]:
    """The group-claim pipelines whose consumer group the collectors last sampled as a share
    group."""
    if "group_type" not in group_offsets.column_names or group_offsets.num_rows == 0:
        return frozenset()
    typed = group_offsets.filter(pc.is_valid(group_offsets["group_type"]))
    newest: dict[str, str] = {}
    ordered = typed.sort_by([("sampled_at", "ascending")])
    for group, kind in zip(
        ordered["group_id"].to_pylist(), ordered["group_type"].to_pylist(), strict=True
    ):
        newest[group] = kind
    return frozenset(
        p.name
        for p in config.pipelines
        if p.deadline() is None
        and p.consumer_group
        and newest.get(p.consumer_group) == GroupType.SHARE
    )


def _in(table: pa.Table, pipelines: frozenset[str]) -> pa.ChunkedArray:
    return pc.is_in(table["pipeline"], pa.array(sorted(pipelines), pa.string()))


def named_duplicates(duplicates: pa.Table, pipelines: frozenset[str]) -> pa.Table:
    """`duplicates` (the published table, causes explained) with a share-group pipeline's
    reprocessing named redelivery, its evidence saying so."""
    if not pipelines or duplicates.num_rows == 0:
        return duplicates
    hit = pc.and_(
        _in(duplicates, pipelines),
        pc.equal(duplicates["cause"], DuplicateCause.REPROCESSING.value),
    )
    hit = pc.fill_null(hit, False)
    cause = pc.if_else(hit, DuplicateCause.REDELIVERY.value, duplicates["cause"])
    told = pc.if_else(
        hit,
        pc.binary_join_element_wise(pc.fill_null(duplicates["evidence"], ""), REDELIVERED, "; "),
        duplicates["evidence"],
    )
    named = duplicates.set_column(duplicates.schema.get_field_index("cause"), "cause", cause)
    return named.set_column(named.schema.get_field_index("evidence"), "evidence", told)


def named_losses(lost: pa.Table, pipelines: frozenset[str]) -> pa.Table:
    """`lost` (the published table) with a share-group pipeline's 'not in sink' named
    'acknowledged or archived'."""
    if not pipelines or lost.num_rows == 0:
        return lost
    hit = pc.fill_null(
        pc.and_(_in(lost, pipelines), pc.equal(lost["cause"], LossCause.NOT_IN_SINK.value)),
        False,
    )
    cause = pc.if_else(hit, LossCause.ACKNOWLEDGED_OR_ARCHIVED.value, lost["cause"])
    return lost.set_column(lost.schema.get_field_index("cause"), "cause", cause)
