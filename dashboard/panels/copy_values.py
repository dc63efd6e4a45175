"""The values of one duplicated id's copies, read back from Kafka on request and decoded
(dgm.contracts.record_view: by the writer schema when framed for a registry): what an operator
compares to see whether the copies are the same record. Never read unasked, never stored;
hidden for the topics of a pipeline that sets `hide_values`."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import queries
from dgm.clients.record_reader import ReadRecord, RecordUnreadable, read_records
from dgm.clients.schema_registry import cluster_schemas
from dgm.config.document import DgmConfig
from dgm.contracts.clusters import EXTERNAL_PREFIX, split
from dgm.contracts.record_view import value_view
from dgm.contracts.registered_schemas import SchemaLookup


def _hiding(config: DgmConfig, topic: str) -> list[str]:
    """The pipelines that read or write `topic` and hide their values."""
    return [
        p.name
        for p in config.pipelines
        if p.hide_values and topic in (*p.source_topics, *p.sink_topics)
    ]


def _show(where: str, found: ReadRecord | None, schemas: SchemaLookup | None) -> None:
    if found is None:
        st.markdown(f"**{where}**: no longer in the log (retention or compaction removed it)")
        return
    view = value_view(found.value, found.headers, schemas)
    key = f", key `{found.key.decode('utf-8', 'replace')}`" if found.key is not None else ""
    st.markdown(f"**{where}**{key}: {view.read_as}")
    if view.text:
        st.code(view.text, language="json" if view.is_json else None)


def render(topic: str, message_id: str, copies: pd.DataFrame) -> None:
    """`copies`: the story's rows (copy_number, partition, offset) of `message_id` on
    `topic`."""
    if topic.startswith(EXTERNAL_PREFIX):
        return  # a table's rows: no log to read them from
    config = queries.config()
    hiding = _hiding(config, topic)
    if hiding:
        st.caption(f"Values hidden: pipeline {', '.join(hiding)} sets hide_values.")
        return
    # Read on a press only; then shown on every rerun (auto-refresh) until the id changes.
    key = f"copy-values/{topic}/{message_id}"
    pressed = st.button("Read these copies' values from Kafka", key=key)
    read: set[str] = st.session_state.setdefault("copy_values_read", set())
    if not pressed and key not in read:
        return
    read.add(key)
    cluster, name = split(topic, tuple(config.clusters))
    settings = config.cluster_config(cluster)
    wanted = [(int(p), int(o)) for p, o in zip(copies["partition"], copies["offset"], strict=True)]
    try:
        with st.spinner(f"reading {len(wanted)} records from {name}"):
            found = read_records(settings, name, wanted)
    except RecordUnreadable as error:
        st.warning(f"Could not read {name} on cluster {cluster}: {error}")
        return
    schemas = cluster_schemas(settings)
    with st.container(key="copy-values"):  # st-key-copy-values: what a browser test finds
        for number, place in zip(copies["copy_number"], wanted, strict=True):
            where = f"copy {int(number)}: partition {place[0]}, offset {place[1]}"
            _show(where, found.get(place), schemas)
