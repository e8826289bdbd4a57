"""Plotly figure builders, one module per area (plus `axes` for shared axis helpers).

Each builder takes a result or its tidy tables and returns a `plotly.graph_objects.Figure`; no
module here imports streamlit or computes a number the figure shows (that happens in core).
"""
