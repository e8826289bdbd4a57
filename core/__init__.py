"""UI-agnostic computation for the curator dashboard.

Nothing under ``core`` imports streamlit or plotly. Each area package (``core.census``,
``core.districts``, ``core.synthesis``, ``core.coherence``, ``core.fairness``) exports a frozen Plan,
``run(plan, data=None, *, progress=None)`` and a Result with tidy tables; ``python -m core reproduce``
reruns a saved report headless. See docs/architecture.md.
"""
