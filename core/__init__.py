"""UI-agnostic computation for the curator dashboard.

Nothing under ``core`` imports streamlit; plotly is imported only where figures are drawn (``core.figures``)
or written into a report (``core.stakeholder_report``). Each area package (``core.census``,
``core.districts``, ``core.synthesis``, ``core.coherence``, ``core.fairness``) exports a frozen Plan,
``run(plan, data=None, *, progress=None)`` and a Result with tidy tables; ``python -m core reproduce``
reruns a saved report headless. See docs/architecture.md.
"""
