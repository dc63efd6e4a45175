"""Dashboard: read-only Streamlit app over the published DuckDB file."""
