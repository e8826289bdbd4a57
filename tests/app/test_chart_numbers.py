"""Charts of the fairness results carry their numbers as text: the table each is drawn from, in an expander."""
from tests.app.test_fairness_results import app, run_small


def _numbers(at, what: str):
    box = next(e for e in at.expander if e.label == f"The numbers behind {what}")
    return box.dataframe[0].value


def test_frontier_and_group_charts_have_their_tables_beside_them():
    at = run_small(app())
    frontier = _numbers(at, "the frontier")
    # one row per swept point: the same count the results hand back as frontier_points
    assert len(frontier) == at.session_state["tables"]["frontier_points"][0] == 10
    groups = _numbers(at, "the group error rates")
    # the chart's rows: every group at the one operating point chosen, a part of the full group table
    assert groups["target"].nunique() == 1 and 0 < len(groups) < at.session_state["tables"]["group_rates"][0]
