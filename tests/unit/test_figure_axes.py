"""Log-axis ticks: 1-2-5 steps, powers of ten over wide ranges, narrow axes widened to show two ticks."""
import numpy as np
import plotly.graph_objects as go
import pytest

from core.figures.axes import log_tick_values, tidy_log_axes


@pytest.mark.parametrize("lo, hi, expected", [
    (9.6, 655, [10, 20, 50, 100, 200, 500]),
    (0.001, 5000, [0.001, 0.01, 0.1, 1, 10, 100, 1000]),
    (0.02, 0.09, [0.02, 0.05]),
    (13, 14.5, [10, 20]),
])
def test_tick_values(lo, hi, expected):
    assert log_tick_values(lo, hi) == pytest.approx(expected)


def test_only_log_axes_change_and_narrow_ones_are_widened():
    fig = go.Figure(go.Bar(x=["a", "b"], y=[13, 14.5], error_y=dict(array=[0.5, 0.5])))
    fig.add_scatter(x=[0.1, 5], y=[1, 2], xaxis="x2", yaxis="y2")
    fig.update_layout(yaxis_type="log", xaxis2=dict(type="log"), yaxis2=dict(type="linear"))
    tidy_log_axes(fig)
    assert fig.layout.yaxis.tickvals == (10, 20) and fig.layout.yaxis.tickformat == ",~r"
    low, high = fig.layout.yaxis.range
    assert low < 1 and high > np.log10(20)          # both ticks inside the widened range
    assert fig.layout.xaxis2.tickvals == (0.1, 0.2, 0.5, 1, 2, 5)
    assert fig.layout.xaxis.tickvals is None and fig.layout.yaxis2.tickvals is None
