"""UI-agnostic computation for the curator dashboard.

Nothing under ``core`` imports streamlit or plotly; pages call into it with plain
config dataclasses and get tidy pandas results back.
"""
