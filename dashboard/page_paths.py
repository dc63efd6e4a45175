"""The pages as st.page_link and st.switch_page name them: their scripts, relative to app.py."""

from __future__ import annotations

OVERVIEW = "views/overview.py"
TOPIC = "views/topic.py"
GROUPS = "views/groups.py"
