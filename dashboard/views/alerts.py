"""Alerts: a placeholder until the alerts feature lands."""

from __future__ import annotations

import streamlit as st

st.title("Alerts")
st.info("Alert rules arrive with the alerts feature.", icon=":material/notifications:")
