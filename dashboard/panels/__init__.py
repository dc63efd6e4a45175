"""The pages' panels, one module each: a page in views/ is the short composition of its panels,
and a panel renders with Streamlit over the query modules (dashboard/*queries.py)."""
