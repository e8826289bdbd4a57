"""Per-group curves stay readable with many groups: the worst and smallest coloured, the rest grey, facets."""
import re

import pandas as pd

from core.synthesis.sweep import SweepResult, smallest_strata
from core.figures import synthesis as figs


def _sweep(n_groups: int = 36) -> SweepResult:
    """A sweep result built by hand: group g has 10 * (g + 1) rows and error 1 / (g + 1) (the smallest worst),
    except group 20, made worst at the largest epsilon."""
    groups = [f"g{i:02d}" for i in range(n_groups)]
    rows, strata = [], []
    for eps in (0.5, 5.0):
        for seed in (0, 1):
            for method in ("stratified", "pooled"):
                for i, g in enumerate(groups):
                    value = 1.0 / (i + 1) + 0.01 * seed
                    if g == "g20" and eps == 5.0:
                        value = 2.0
                    rows.append((eps, seed, method, g, 10 * (i + 1), "tvd_2way", value))
            for i, g in enumerate(groups):
                strata.append({"epsilon": eps, "seed": seed, "group": g, "real_rows": 10 * (i + 1),
                               "size_used": 10.0 * (i + 1), "sample_share": 1 / n_groups, "fate": "own model"})
    gm = pd.DataFrame(rows, columns=["epsilon", "seed", "method", "group", "real_rows", "metric", "value"])
    om = pd.DataFrame([(e, s, m, "tvd_2way", 0.1) for e in (0.5, 5.0) for s in (0, 1)
                       for m in ("stratified", "pooled")], columns=["epsilon", "seed", "method", "metric", "value"])
    return SweepResult(gm, om, pd.DataFrame(strata), pd.DataFrame(), "", measures=("tvd_2way", "tvd_1way"))


def _inputs(sweep):
    curves = sweep.curves("tvd_2way")
    sizes = curves.groupby("group")["real_rows"].first().to_dict()
    return curves.drop(columns="real_rows"), sizes


def test_the_worst_and_smallest_groups_are_picked_from_the_results_views():
    sweep = _sweep()
    curves, sizes = _inputs(sweep)
    marked = figs.highlighted_groups(sweep.worst_groups("tvd_2way"), sizes)
    # g20 is worst at the largest epsilon; g00 is worst at the smallest and also the smallest group
    assert list(marked)[:2] == ["g20", "g00"]
    assert marked["g00"] == "worst, smallest" and marked["g01"] == "smallest" and marked["g02"] == "smallest"
    assert len(marked) == 4


def test_with_many_groups_only_the_highlighted_are_coloured_and_the_rest_are_thin_grey_without_bands():
    sweep = _sweep()
    curves, sizes = _inputs(sweep)
    marked = figs.highlighted_groups(sweep.worst_groups("tvd_2way"), sizes)
    fig = figs.group_curves_figure(curves, "tvd_2way", sizes, bands=True, highlight=marked)
    grey = [t for t in fig.data if t.line.color == figs.GREY]
    assert len(grey) == 2 * (36 - len(marked))                          # every other group, both panels
    assert all(t.line.width == 1 and t.fill is None for t in grey)
    assert sum(t.showlegend for t in grey) == 1                          # one legend entry for them all
    assert grey[0].name == f"other groups ({36 - len(marked)})"
    bands = [t for t in fig.data if t.fill == "toself"]
    assert {t.legendgroup for t in bands} <= set(marked)                # bands only behind coloured lines
    coloured = [t for t in fig.data if t.fill is None and t.line.color != figs.GREY]
    assert {t.legendgroup for t in coloured} == set(marked)
    assert len({t.line.color for t in coloured}) == len(marked)         # one colour per highlighted group
    for t in coloured:                                                   # named at the line's end, not colour only
        assert list(t.text)[-1] == t.legendgroup and all(x == "" for x in list(t.text)[:-1])
    assert fig.data[-1].line.color != figs.GREY                          # coloured lines drawn over the grey


def test_the_legends_sizes_are_the_smallest_strata_tables_numbers():
    sweep = _sweep()
    curves, sizes = _inputs(sweep)
    marked = figs.highlighted_groups(sweep.worst_groups("tvd_2way"), sizes)
    fig = figs.group_curves_figure(curves, "tvd_2way", sizes, highlight=marked)
    table = smallest_strata(sweep, "tvd_2way", n=36).set_index("group")["real_rows"]
    shown = [t for t in fig.data if t.showlegend and t.legendgroup in marked]
    assert len(shown) == len(marked)
    for t in shown:
        n = int(re.search(r"n=([\d,]+)", t.name).group(1).replace(",", ""))
        assert n == table[t.legendgroup]
    assert "training rows" in fig.layout.legend.title.text


def test_few_groups_keep_one_colour_each_and_their_bands():
    sweep = _sweep(4)
    curves, sizes = _inputs(sweep)
    fig = figs.group_curves_figure(curves, "tvd_2way", sizes, bands=True,
                                   highlight=figs.highlighted_groups(sweep.worst_groups("tvd_2way"), sizes))
    lines = [t for t in fig.data if t.fill is None]
    assert len(lines) == 8 and not any(t.line.color == figs.GREY for t in lines)
    assert len({t.line.color for t in lines}) == 4
    assert len([t for t in fig.data if t.fill == "toself"]) == 8         # seeds differ: a band per line


def test_small_multiples_give_one_panel_per_group_with_both_methods():
    sweep = _sweep(10)
    curves, sizes = _inputs(sweep)
    marked = figs.highlighted_groups(sweep.worst_groups("tvd_2way"), sizes)
    fig = figs.group_curves_figure(curves, "tvd_2way", sizes, bands=False, highlight=marked, facets=True)
    titles = [a.text for a in fig.layout.annotations]
    assert len(titles) == 10 and titles[0].startswith("g09 (n=100")     # largest first
    assert sum(t.startswith("<b>") for t in titles) == len(marked)       # highlighted panels say why
    lines = [t for t in fig.data if t.fill is None]
    assert len(lines) == 20 and {t.name for t in lines} == {"stratified", "pooled"}
    assert sum(t.showlegend for t in lines) == 2
    assert len({t.xaxis for t in lines}) == 10


def test_accuracy_has_no_worst_group_so_only_the_smallest_are_marked():
    sizes = {"a": 5, "b": 50, "c": 0, "d": 7, "e": 9}
    assert figs.highlighted_groups(None, sizes, n_smallest=2) == {"a": "smallest", "d": "smallest"}
    assert "Smallest strata" in figs.SIZE_NOTE and "test rows" in figs.SIZE_NOTE
