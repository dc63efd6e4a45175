"""The dashboard's pages, run by dashboard/app.py through st.navigation (not a pages/ folder)."""
