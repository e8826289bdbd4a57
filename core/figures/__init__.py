"""Plotly figures that both the pages and the command line draw (no streamlit here)."""
