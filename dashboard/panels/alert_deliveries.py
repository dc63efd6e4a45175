"""The Alerts page's notification deliveries: webhook notifications that failed or wait for a
(re)try, those delivered, and what a local receiver got."""

from __future__ import annotations

import streamlit as st

from dashboard import alerting
from dgm.alerting.store import AlertStore
from dgm.config.document import DgmConfig

MAX_DELIVERIES = 200


def render(store: AlertStore, config: DgmConfig) -> None:
    _undelivered(store, config)
    _delivered(store)
    _received(store)


def _undelivered(store: AlertStore, config: DgmConfig) -> None:
    st.header("Notification deliveries", anchor=False)
    st.caption("Webhook notifications that failed or wait for a (re)try, then the delivered.")
    undelivered = store.deliveries(MAX_DELIVERIES, "pending") + store.deliveries(
        MAX_DELIVERIES, "failed"
    )
    if not config.alerts_webhook.url:
        st.caption(
            "No `[alerts_webhook] url` in dgm.toml: notifications go to the `dgm.alerts` log only."
        )
    if not undelivered:
        if config.alerts_webhook.url:
            st.success("Every webhook notification so far was delivered.")
        return
    failed = [d for d in undelivered if d.error]
    if failed:
        newest = max(failed, key=lambda d: d.id)
        st.error(
            f"**{len(failed)} webhook notification(s) failed** to reach the receiver; the "
            f"latest error: `{newest.error}`. Pending ones are retried after later analysis "
            "runs (with backoff), and given up after a day.",
            icon=":material/error:",
        )
    table = alerting.deliveries_table(undelivered)
    st.dataframe(table, hide_index=True, width="stretch")


def _delivered(store: AlertStore) -> None:
    delivered = store.deliveries(MAX_DELIVERIES, "delivered")
    if not delivered:
        return
    st.caption(f"Delivered to the webhook, newest first (the last {MAX_DELIVERIES} at most).")
    st.dataframe(alerting.delivered_table(delivered), hide_index=True, width="stretch")


def _received(store: AlertStore) -> None:
    """What a local receiver (`dgm demo`'s) got: the far end of the deliveries above."""
    received = store.received(MAX_DELIVERIES)
    if not received:
        return
    st.subheader("Received by the local webhook receiver", anchor=False)
    st.caption(
        f"{len(received)} notification(s) this state directory's receiver got (`dgm demo` "
        "runs one on 127.0.0.1 and sends its alerts there), newest first."
    )
    st.dataframe(alerting.received_table(received), hide_index=True, width="stretch")
