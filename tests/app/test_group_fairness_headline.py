"""Every headline number the Group fairness page shows is the result's own headline number, formatted:
on the defaults and after changing the seed."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.fairness import run_group_fairness
from core.fairness.group_fairness_plan import WORST_OFF_NAME

PAGE = str(Path(__file__).resolve().parents[2] / "dashboard" / "tools" / "group_fairness.py")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "gf_headline_cache"))


def _check_headline_shown(at):
    assert not at.exception and not at.error
    result = run_group_fairness(at.session_state["gf_plan"])
    head = result.headline()
    text = "\n".join(m.value for m in at.markdown)
    lines = {line.split(":", 1)[0].lstrip("- "): line for line in text.splitlines() if line.startswith("- ")}
    view = result.worst_off()
    assert len(view) == result.plan.lexifair.levels + 1
    for row in view.itertuples(index=False):
        value = head[WORST_OFF_NAME.format(model=row.model)]
        assert lines[row.model] == (f"- {row.model}: {row.group}, **{value:.3f}** — {row.interval}")
        assert result.headline_uncertainty()[row.headline_name] == f"{row.group}: {row.interval}"
    levels = next(d.value for d in at.dataframe if "Level" in d.value.columns)
    for level, eta in zip(levels["Level"], levels["eta-hat (sum of the worst j errors)"]):
        assert eta == round(head[f"eta_hat level {level}"], 4)
    k = max(result.plan.ranking.ks)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[f"Utility loss at k = {k}"] == f"{100 * head[f'utility loss at k={k}']:.1f}%"
    assert metrics[f"AP@{k} against the original top k"] == f"{head[f'AP at k={k}']:.3f}"
    low, high = head[f"lowest selection rate at k={k}"], head[f"highest selection rate at k={k}"]
    assert metrics["Selection-rate range at that k"] == f"{low:.2f} – {high:.2f}"
    top = result.ranking.counterfactual_at_top()
    assert (top.k, top.rate_low, top.rate_high) == (k, low, high)
    words = result.headline_uncertainty()
    assert words[f"lowest selection rate at k={k}"].startswith(f"{top.rate_low_group}: ")
    assert words[f"highest selection rate at k={k}"].startswith(f"{top.rate_high_group}: ")
    feasible = " ".join(s.value for s in at.success)
    assert f"false positive rate {head['equal error rates: FPR']:.3f}" in feasible
    assert f"true positive rate {head['equal error rates: TPR']:.3f}" in feasible
    return head


def test_headline_numbers_on_the_page_are_the_results_on_defaults_and_after_a_new_seed():
    at = AppTest.from_file(PAGE, default_timeout=300).run()
    first = _check_headline_shown(at)
    at.number_input(key="gf_seed").set_value(1).run()
    assert at.session_state["gf_plan"].seed == 1
    second = _check_headline_shown(at)
    assert first[WORST_OFF_NAME.format(model="ERM (plain accuracy)")] != \
        second[WORST_OFF_NAME.format(model="ERM (plain accuracy)")]
