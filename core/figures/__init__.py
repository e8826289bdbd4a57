"""Plotly figure builders, one module per area (``axes`` holds the shared axis helpers), drawn by the pages,
the stakeholder reports and the scripts the command line writes alike.

Each builder takes a result or its tidy tables and returns a ``plotly.graph_objects.Figure``; no module here
imports streamlit or computes a number the figure shows (that happens in the areas).
"""
