"""The stratified-mean release: its accounting, reproducibility, and refusals."""
import math

import numpy as np
import pandas as pd
import pytest

from core.contracts import DataRef
from core.privacy.accounting import rho_for_epsilon
from core.synthesis.mean_release import MeanReleasePlan, projected_ledger, release_stratified_mean


def _plan(**kw):
    base = dict(data=DataRef("cps"), column="income", strata=("sex", "race"), epsilon=1.0, category="50K+")
    base.update(kw)
    return MeanReleasePlan(**base)


def _upload_frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"hours": rng.integers(0, 80, n), "sex": rng.choice(["F", "M"], n),
                         "region": rng.choice(["north", "south", "east"], n)})


def test_laplace_ledger_adds_to_the_stated_epsilon_by_hand():
    plan = _plan(epsilon=1.5, pooled_share=0.2, count_share=0.1)
    rel = release_stratified_mean(plan)
    # pooled 0.2 x 1.5 = 0.3 in sequence; strata 1.2: counts 0.12 and sums 1.08, in parallel over strata
    amounts = dict(zip(rel.ledger_table["label"], rel.ledger_table["amount"]))
    assert amounts == pytest.approx({"pooled sum (comparison)": 0.3, "stratum counts": 0.12, "stratum sums": 1.08})
    assert rel.budget.is_pure()
    assert rel.budget.total("epsilon") == pytest.approx(0.3 + 0.12 + 1.08) == pytest.approx(1.5)
    assert projected_ledger(plan).total("epsilon") == pytest.approx(rel.budget.total("epsilon"))


def test_gaussian_ledger_is_the_rho_of_epsilon_at_delta():
    plan = _plan(noise="gaussian", epsilon=2.0, delta=1e-7, size_policy="public", sizes_declared_public=True,
                 pooled_share=0.0)
    rel = release_stratified_mean(plan)
    rho = rho_for_epsilon(2.0, 1e-7)
    assert rel.budget.total("rho") == pytest.approx(rho)
    assert rel.budget.total("epsilon", delta=1e-7) == pytest.approx(2.0, rel=1e-6)
    assert list(rel.ledger_table["label"]) == ["stratum sums"]          # public sizes, no pooled: one spend
    assert list(rel.overall["estimate"]) == ["stratified (recombined)"]


def test_seeded_simulation_reproduces_and_secure_release_differs():
    a = release_stratified_mean(_plan(seed=3))
    b = release_stratified_mean(_plan(seed=3))
    c = release_stratified_mean(_plan(seed=4))
    pd.testing.assert_frame_equal(a.strata, b.strata)
    pd.testing.assert_frame_equal(a.overall, b.overall)
    assert not np.allclose(a.strata["mean"], c.strata["mean"])
    assert a.statement.startswith("Simulation")
    s = release_stratified_mean(_plan(seed=3), secure=True)
    assert s.secure and s.statement.startswith("Release") and not np.allclose(s.strata["mean"], a.strata["mean"])


def test_estimates_track_the_true_shares_and_hide_exact_sizes():
    from core.datasets import load_dataset

    raw = load_dataset("cps")
    truth = (raw["income"] == "50K+").groupby(raw["sex"], observed=True).mean()
    rel = release_stratified_mean(_plan(strata=("sex",), epsilon=5.0))
    got = dict(zip(rel.strata["group"], rel.strata["mean"]))
    assert got["Male"] == pytest.approx(truth["Male"], abs=0.01)
    assert got["Female"] == pytest.approx(truth["Female"], abs=0.01)
    assert "size" not in rel.strata.columns and "noisy_size" in rel.strata.columns
    exact = raw["sex"].value_counts()
    assert not set(np.round(rel.strata["noisy_size"], 6)) & set(exact.astype(float))
    exported = rel.export()
    assert "size" not in exported.columns and list(exported["group"][-2:]) == ["stratified (recombined)",
                                                                                "pooled (comparison)"]
    numbers = exported.select_dtypes("number").to_numpy().ravel()
    assert not set(np.round(numbers[np.isfinite(numbers)], 9)) & (set(exact.astype(float)) | {float(len(raw))})
    text = rel.statement + " ".join(rel.ledger_table["measured"])
    assert not any(f"{n}" in text or f"{n:,}" in text for n in [*exact, len(raw)])
    assert (rel.strata["ci_low"] <= rel.strata["mean"]).all() and (rel.strata["mean"] <= rel.strata["ci_high"]).all()
    stratified = rel.overall.set_index("estimate").loc["stratified (recombined)"]
    assert stratified["mean"] == pytest.approx((raw["income"] == "50K+").mean(), abs=0.01)


def test_public_laplace_standard_error_is_the_known_noise_over_the_size():
    raw = _upload_frame()
    plan = MeanReleasePlan(DataRef("cps"), "hours", ("sex",), epsilon=0.5, value_range=(0.0, 100.0),
                           size_policy="public", sizes_declared_public=True, pooled_share=0.0)
    rel = release_stratified_mean(plan, raw)
    b = 50.0 / 0.5                                             # h = (100 - 0) / 2, epsilon 0.5
    sizes = raw["sex"].value_counts().sort_index().to_numpy()
    assert rel.strata["size"].tolist() == sizes.tolist()       # declared public: shown as they are
    assert rel.strata["se"].to_numpy() == pytest.approx(math.sqrt(2) * b / sizes)
    assert rel.overall["se"].iloc[0] == pytest.approx(math.sqrt(2 * 2 * b * b) / sizes.sum())


@pytest.mark.parametrize("change,message", [
    (dict(category=None), "public range"),
    (dict(category=None, value_range=None), "public range"),
    (dict(epsilon=0.0), "above 0"),
    (dict(epsilon=-1.0), "above 0"),
    (dict(strata=()), "at least one strata column"),
    (dict(column="sex", strata=("sex",)), "is a strata column"),
    (dict(size_policy="public"), "declared public"),
    (dict(value_range=(0, 1)), "public range"),
])
def test_bad_plans_are_refused_with_a_clear_message(change, message):
    with pytest.raises(ValueError, match=message):
        _plan(**change)


def test_a_numeric_column_or_missing_category_is_refused_at_run():
    with pytest.raises(ValueError, match="not a category"):
        release_stratified_mean(_plan(category="rich"))
    with pytest.raises(ValueError, match="not numeric"):
        release_stratified_mean(_plan(category=None, value_range=(0.0, 1.0)))
    with pytest.raises(ValueError, match="not in the data"):
        release_stratified_mean(_plan(column="salary"))


def test_an_empty_public_stratum_gets_no_estimate_and_no_weight():
    raw = _upload_frame()
    raw["region"] = pd.Categorical(raw["region"], categories=["east", "north", "south", "west"])   # west: empty
    plan = MeanReleasePlan(DataRef("cps"), "hours", ("region",), value_range=(0.0, 100.0),
                           size_policy="public", sizes_declared_public=True)
    rel = release_stratified_mean(plan, raw)
    west = rel.strata.set_index("group").loc["west"]
    assert np.isnan(west["mean"]) and west["weight"] == 0 and "no estimate" in west["note"]
    assert np.isfinite(rel.overall["mean"]).all()


def test_an_upload_needs_declared_categories():
    ref = DataRef("upload", fingerprint="ab" * 32)
    with pytest.raises(ValueError, match="public knowledge"):
        MeanReleasePlan(ref, "hours", ("sex",), value_range=(0.0, 100.0))


def test_strata_whose_count_noise_swamps_the_size_are_flagged():
    rel = release_stratified_mean(_plan(epsilon=0.1, seed=1))
    flagged = rel.strata["note"].str.contains("interval approximate")
    assert flagged.any() and not flagged.all()
    # the flag follows the released numbers: count noise sd over a tenth of the noisy size
    sd = math.sqrt(2) * 1 / (0.1 * 0.8 * 0.1)                 # Laplace count scale 1 / (0.1 x 0.8 x 0.1)
    assert (flagged == (sd > 0.1 * rel.strata["noisy_size"].abs())).all()
    public = release_stratified_mean(_plan(epsilon=0.1, seed=1, size_policy="public", sizes_declared_public=True))
    assert not public.strata["note"].str.contains("approximate").any()


def test_pooled_laplace_interval_is_the_laplace_quantile_not_the_normal_one():
    """With public sizes the pooled mean's only noise is one Laplace draw of scale b = h / epsilon_pooled
    over n rows: its 95% interval is mean +/- b ln(20) / n (P(|X| > t) = exp(-t / b)), not 1.96 sd."""
    raw = _upload_frame()
    plan = MeanReleasePlan(DataRef("cps"), "hours", ("sex",), epsilon=0.5, value_range=(0.0, 100.0),
                           size_policy="public", sizes_declared_public=True, pooled_share=0.2)
    rel = release_stratified_mean(plan, raw)
    pooled = rel.overall.set_index("estimate").loc["pooled (comparison)"]
    b = 50.0 / (0.2 * 0.5)
    half = b * math.log(20) / len(raw)
    assert half < pooled["mean"] < 100 - half                   # the interval is not clipped to the range
    assert (pooled["ci_high"] - pooled["ci_low"]) / 2 == pytest.approx(half)
    assert pooled["se"] == pytest.approx(math.sqrt(2) * b / len(raw))


def test_each_measurement_of_a_seeded_mean_release_draws_from_its_own_stream():
    """Dropping the pooled comparison, or buying DP counts instead of declaring sizes public, leaves
    the noise of the other measurements where it was (only its scale follows the budget)."""
    raw = _upload_frame()
    base = dict(data=DataRef("cps"), column="hours", strata=("sex",), epsilon=1.0, value_range=(0.0, 100.0),
                seed=5)
    public = dict(size_policy="public", sizes_declared_public=True)
    true = raw.groupby("sex")["hours"].apply(lambda v: (v.clip(0, 100) - 50).sum()).to_numpy()

    def sum_noise(rel):           # the noisy stratum sums less the true ones (means are centred on 50)
        size = rel.strata["size" if "size" in rel.strata else "noisy_size"].to_numpy()
        return (rel.strata["mean"].to_numpy() - 50.0) * size - true

    def pooled_noise(rel):
        size = rel.strata["size" if "size" in rel.strata else "noisy_size"].sum()
        return (rel.overall.set_index("estimate").loc["pooled (comparison)", "mean"] - 50.0) * size - true.sum()

    with_pooled = release_stratified_mean(MeanReleasePlan(**base, **public, pooled_share=0.2), raw)
    without = release_stratified_mean(MeanReleasePlan(**base, **public, pooled_share=0.0), raw)
    counted = release_stratified_mean(MeanReleasePlan(**base, pooled_share=0.2), raw)
    # Laplace noise is proportional to 1 / budget: sums get 0.8, 1.0 and 0.8 x 0.9 of epsilon
    assert (sum_noise(with_pooled) * 0.8).tolist() == pytest.approx((sum_noise(without) * 1.0).tolist())
    assert (sum_noise(with_pooled) * 0.8).tolist() == pytest.approx((sum_noise(counted) * 0.72).tolist())
    assert pooled_noise(counted) == pytest.approx(pooled_noise(with_pooled))
