"""Session figures say what they show without relying on colour alone."""
import pandas as pd

from core.figures.fairness_sessions import agreement_figure, progress_figure


def test_progress_parts_differ_by_pattern_as_well_as_colour():
    progress = pd.DataFrame({"stakeholder": ["Ann", "Bo"], "answered": [3, 5], "of": [5, 5], "skipped": [1, 0]})
    fig = progress_figure(progress)
    shapes = {t.name: t.marker.pattern.shape for t in fig.data}
    assert set(shapes) == {"answered", "skipped", "open"}
    assert len({s or "" for s in shapes.values()}) == 3          # three different fills
    assert list(fig.data[0].x) == [2, 5] and list(fig.data[2].x) == [2, 0]   # answered minus skipped; still open


def test_the_half_line_of_the_agreement_chart_is_labelled():
    constraints = pd.DataFrame({"i": [1, 2], "j": [3, 4], "n_judges": [4, 2], "n_same": [1, 2]})
    fig = agreement_figure(constraints)
    assert [a.text for a in fig.layout.annotations] == ["half the judges"]
    assert list(fig.data[0].y) == [0.25, 1.0]
