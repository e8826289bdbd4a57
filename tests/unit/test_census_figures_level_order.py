"""Census charts list levels from the top down (state, county, tract, block group, block), whatever the row order."""
import pandas as pd

from core.figures import census as figs

DOWN = ["state", "county", "tract", "block group", "block"]
SHUFFLED = ["block", "county", "block group", "state", "tract"]


def test_top_down_orders_census_levels_and_keeps_other_names_as_given():
    assert figs.top_down(SHUFFLED) == DOWN
    assert figs.top_down(["level 2", "level 0", "level 1"]) == ["level 2", "level 0", "level 1"]
    assert figs.top_down(["block", "state", "ward"]) == ["state", "block", "ward"]


def test_every_by_level_chart_is_pinned_top_down():
    levels = pd.DataFrame({"level": SHUFFLED, "budget (epsilon)": [0.1, 0.2, 0.3, 0.2, 0.2],
                           "share": [0.1, 0.2, 0.3, 0.2, 0.2]})
    presets = pd.DataFrame({"level": SHUFFLED * 2, "sd": range(10), "split": ["equal"] * 5 + ["leaf"] * 5})
    effects = pd.DataFrame({"level": SHUFFLED * 2, "sd": range(1, 11), "invariant": ["none"] * 5 + ["state"] * 5})
    algos = pd.DataFrame({"algorithm": ["ToyDown"] * 5, "level": SHUFFLED, "MAE of unit totals": [1.0, 2, 3, 0, 4]})
    for fig in (figs.budget_shares_figure(levels, "epsilon"), figs.presets_figure(presets, "level"),
                figs.invariant_figure(effects, "sd"), figs.algorithm_figure(algos)):
        assert fig.layout.xaxis.categoryorder == "array"
        assert list(fig.layout.xaxis.categoryarray) == DOWN
    algo = figs.algorithm_figure(algos)
    assert list(algo.layout.xaxis.tickvals) == DOWN and "exact: ToyDown" in algo.layout.xaxis.ticktext[0]
