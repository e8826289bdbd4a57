"""Audit protocol, verdict logic and the spec's worked examples and sanity experiments."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from core.coherence.adversaries import Adversary
from core.coherence import AdversaryChoice, AuditPlan, Condition, CustomSubgroup, ReleaseChoice
from core.coherence.audit import coherence_audit, coherence_curve, release_theory
from core.coherence.releases import make_release, release_params
from core.coherence.run import compare_releases
from core.coherence.subgroups import Subgroup, build_subgroups, custom_subgroup
from core.coherence.verdicts import alpha_at_beta, clopper_pearson, decide, overall_verdict, trials_needed


class CodeScore(Adversary):
    """Test adversary ignoring the report: a fixed score per code of the first lens column."""
    key, label = "code_score", "code score"

    def __init__(self, table):
        self.table = np.asarray(table, float)

    def fit(self, report, schema, rng):
        return lambda q: self.table[q[:, 0]]


def _fixture(n=2000, seed=0):
    """Synthetic people with unique-ish lens values and a target that depends on them."""
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 18, n)
    sex = rng.integers(0, 2, n)
    region = rng.integers(0, 50, n)
    race = rng.choice(4, n, p=[0.6, 0.2, 0.15, 0.05])
    y = rng.random(n) < 1 / (1 + np.exp(-(-1 + 0.08 * age + 0.5 * sex)))
    return pd.DataFrame({"age": age, "sex": sex, "region": region, "race": race,
                         "y": np.where(y, "yes", "no")})


# ---- interval and verdict logic -------------------------------------------------------------

def test_clopper_pearson_known_values():
    assert clopper_pearson(0, 58)[1] == pytest.approx(0.05034, abs=1e-5)
    assert clopper_pearson(0, 59)[1] == pytest.approx(0.04951, abs=1e-5)
    assert clopper_pearson(0, 299)[1] == pytest.approx(0.009969, abs=1e-6)
    assert clopper_pearson(0, 59)[1] == pytest.approx(1 - 0.05 ** (1 / 59))
    assert clopper_pearson(10, 10) == (pytest.approx(0.05 ** (1 / 10)), 1.0)
    lo, hi = clopper_pearson(7, 40)
    assert lo == pytest.approx(stats.beta.ppf(0.05, 7, 34)) and hi == pytest.approx(stats.beta.ppf(0.95, 8, 33))


def test_decide_at_the_boundaries():
    assert decide(0.0, 0.05, 0.05) == "PASS"            # upper bound equal to beta passes
    assert decide(0.0, 0.0500001, 0.05) == "INCONCLUSIVE"
    assert decide(0.05, 0.3, 0.05) == "INCONCLUSIVE"     # lower bound must exceed beta strictly
    assert decide(0.0500001, 0.3, 0.05) == "FAIL"
    assert decide(*clopper_pearson(0, 58), 0.05) == "INCONCLUSIVE"
    assert decide(*clopper_pearson(0, 59), 0.05) == "PASS"
    assert decide(*clopper_pearson(1, 59), 0.05) == "INCONCLUSIVE"


def test_overall_verdict():
    assert overall_verdict(["PASS", "FAIL"]) == "FAIL"
    assert overall_verdict(["PASS", "PASS"]) == "PASS"
    assert overall_verdict(["PASS", "INCONCLUSIVE"]) == "INCONCLUSIVE"


@pytest.mark.slow
def test_trials_needed():
    assert trials_needed(0, 10, 0.05) == 59
    assert trials_needed(0, 10, 0.01) == 299
    need = trials_needed(8, 20, 0.05)                     # 40% failure rate: FAIL needs few trials
    assert need is not None and decide(*clopper_pearson(round(0.4 * need), need), 0.05) == "FAIL"
    assert trials_needed(1, 20, 0.05) is None            # exactly at beta: cannot decide
    # with FAIL corrected for three adversaries, 7 of 60 fails only with more trials
    assert decide(clopper_pearson(7, 60, 1 - 0.05 / 3)[0], 1.0, 0.05) == "INCONCLUSIVE"
    corrected = trials_needed(7, 60, 0.05, fail_confidence=1 - 0.05 / 3)
    assert corrected > 60 and decide(clopper_pearson(round(7 / 60 * corrected), corrected, 1 - 0.05 / 3)[0],
                                     1.0, 0.05) == "FAIL"


def test_alpha_at_beta_is_an_order_statistic():
    d = np.arange(1, 101) / 100.0                         # 0.01 .. 1.00
    a = alpha_at_beta(d, 0.05)
    assert a == pytest.approx(0.95)
    assert np.sum(d > a) <= 5 and np.sum(d > a - 1e-6) > 5
    assert alpha_at_beta(d, 0.999) == 0.0 or np.sum(d > alpha_at_beta(d, 0.999)) <= 99


# ---- subgroups and eligibility ----------------------------------------------------------------

def test_build_subgroups_levels_and_intersections():
    df = pd.DataFrame({"a": ["x", "x", "y", "y", "y"], "b": [0, 1, 0, 1, 1]})
    groups = build_subgroups(df, ["a", "b"], order=2)
    names = [g.name for g in groups]
    assert names[0] == "everyone"
    assert {"a=x", "a=y", "b=0", "b=1", "a=y & b=1"} <= set(names)
    sizes = {g.name: int(g.mask.sum()) for g in groups}
    assert sizes["a=y & b=1"] == 2 and sizes["everyone"] == 5
    assert len(build_subgroups(df, ["a", "b"], order=1)) == 5


def test_subgroups_below_gamma_are_excluded():
    df = _fixture(600)
    res = coherence_audit(df, make_release("clear_half"), ["naive_bayes"], "y", ["age", "sex"], ["race"],
                          alpha=0.5, gamma=100, trials=3, seed=0, n_jobs=1)
    sizes = df["race"].value_counts()
    small = {f"race={k}" for k, v in sizes.items() if v < 100}
    assert set(res.excluded["subgroup"]) == small
    assert set(res.subgroups["subgroup"]) == {"everyone"} | {f"race={k}" for k, v in sizes.items() if v >= 100}
    with pytest.raises(ValueError, match="gamma"):
        coherence_audit(df, make_release("clear_half"), ["naive_bayes"], "y", ["age"], ["race"],
                        gamma=10_000, trials=1, seed=0, n_jobs=1)


# ---- worked examples from the paper (spec T1) ---------------------------------------------------

@pytest.mark.slow
def test_two_person_subgroup_splits_with_probability_50_over_99():
    n = 100
    df = pd.DataFrame({"who": np.arange(n), "y": np.tile(["a", "b"], n // 2)})
    table = np.zeros(n + 1)
    table[0], table[1] = -1.0, 1.0
    pair = Subgroup("the pair", np.isin(np.arange(n), [0, 1]))
    T = 2000
    res = coherence_audit(df, make_release("clear_half"), [CodeScore(table)], "y", ["who"], [pair],
                          alpha=1.0, beta=0.05, gamma=1, trials=T, seed=3, n_jobs=1)
    w1 = res.trials["w1"].to_numpy()
    split = np.isfinite(w1)
    assert np.all(w1[split] == 2.0)                         # split pair: W1 = 2 exactly, else NaN
    p = 50 / 99
    assert abs(split.mean() - p) < 4 * np.sqrt(p * (1 - p) / T)
    res3 = coherence_audit(df, make_release("clear_half"), [CodeScore(table)], "y", ["who"],
                           [pair, Subgroup("everyone", np.ones(n, bool))], gamma=3, trials=2,
                           seed=0, n_jobs=1)
    assert list(res3.excluded["subgroup"]) == ["the pair"]


# ---- sanity experiments (spec S1, S2, S4) --------------------------------------------------------

def test_clear_half_with_linkage_matches_exact_formula_and_fails():
    df = _fixture(2000)
    lens = ["age", "sex", "region", "race"]
    res = coherence_audit(df, make_release("clear_half"), ["linkage", "nearest_neighbour"], "y", lens, ["race"],
                          alpha=0.1, gamma=80, trials=8, seed=5, n_jobs=1)
    half = res.example_half
    key = df[lens].astype(str).agg("|".join, axis=1).to_numpy()
    released = set(key[half])
    first = res.trials[(res.trials.trial == 0) & (res.trials.adversary == "Exact linkage (membership)")]
    for _, row in first.iterrows():
        m = res.subgroup_masks[row["subgroup"]]
        held = key[m & ~half]
        expected = 2 * np.mean([k not in released for k in held])
        assert row["w1"] == pytest.approx(expected, abs=1e-12)
    s = res.summary.set_index("adversary")
    assert s.loc["Exact linkage (membership)", "verdict"] == "FAIL"
    assert s.loc["Nearest-neighbour matcher", "verdict"] == "FAIL"
    assert s.loc["Exact linkage (membership)", "beta_hat"] == 1.0
    assert res.releases.loc[0, "verdict"] == "FAIL"


def test_strongly_private_release_passes_with_enough_trials():
    df = _fixture(3000)
    lens = ["age", "sex", "race"]
    res = coherence_audit(df, make_release("laplace_table", epsilon=0.01), ["nearest_neighbour", "naive_bayes"],
                          "y", lens, ["sex"], alpha=0.5, beta=0.05, gamma=500, trials=60,
                          seed=7, n_jobs=1)
    assert (res.summary["verdict"] == "PASS").all()
    assert res.releases.loc[0, "verdict"] == "PASS"
    assert res.releases.loc[0, "privacy"] == "pure_dp"


def test_null_adversary_has_the_null_distribution():
    """Spec S1: a predictor that ignores the report gives D and D0 with the same law."""
    df = _fixture(1500)
    res = coherence_audit(df, make_release("clear_half"), ["random"], "y", ["age", "sex", "region"], ["race", "sex"],
                          alpha=0.1, gamma=80, trials=300, seed=11, n_jobs=1,
                          subgroup_order=1)
    m = res.maxima
    assert stats.ks_2samp(m["D"], m["D_null"]).pvalue > 1e-3
    s = res.summary.iloc[0]
    assert abs(s["beta_hat"] - s["null_beta_hat"]) < 0.12


def test_null_control_of_clear_half_stays_under_its_real_split():
    df = _fixture(2000)
    res = coherence_audit(df, make_release("clear_half"), ["nearest_neighbour"], "y", ["age", "sex", "region", "race"],
                          ["race"], alpha=0.3, gamma=250, trials=20, seed=2, n_jobs=1)
    s = res.summary.iloc[0]
    assert s["null_beta_hat"] <= 0.05 < s["beta_hat"]
    assert s["excess_median"] > 0.3 and s["sign_test_p"] < 1e-4


def test_epsilon_sweep_shrinks_incoherence_towards_the_null():
    df = _fixture(3000)
    rels = [make_release("laplace_table", epsilon=e) for e in (0.05, 1000.0)]
    res = coherence_audit(df, rels, ["naive_bayes", "nearest_neighbour"], "y", ["age", "sex", "race"], ["sex"],
                          alpha=0.2, gamma=200, trials=10, seed=4, n_jobs=1)
    nn = res.summary[res.summary.adversary == "Nearest-neighbour matcher"].set_index("release")
    loose, tight = nn.loc[rels[1].name], nn.loc[rels[0].name]
    assert loose["alpha_hat"] - loose["alpha_hat_null"] > tight["alpha_hat"] - tight["alpha_hat_null"]


# ---- reproducibility, parallelism, configs, errors ---------------------------------------------------

def test_same_seed_same_result_across_worker_counts():
    df = _fixture(800)
    args = (df, [make_release("clear_half"), make_release("gaussian_table", epsilon=1.0)], ["logistic", "naive_bayes"],
            "y", ["age", "sex", "race"], ["sex"])
    a = coherence_audit(*args, trials=4, seed=9, n_jobs=1)
    b = coherence_audit(*args, trials=4, seed=9, n_jobs=2)
    pd.testing.assert_frame_equal(a.maxima, b.maxima)
    calls = []
    coherence_audit(*args, trials=3, seed=9, n_jobs=1,
                    progress=lambda d, t, m: calls.append((d, t)))
    assert calls[-1][0] == calls[-1][1] and len(calls) == 3


def test_plan_on_a_frame_and_curve():
    df = _fixture(1000)
    plan = AuditPlan(target="y", positive="yes", lens=("age", "sex"), subgroup_columns=("sex",),
                     releases=(ReleaseChoice("clear_sample", release_params("clear_sample", k=50)),
                               ReleaseChoice("suppression")),
                     adversaries=(AdversaryChoice("logistic"),), alpha=0.3, trials=3, gamma=50)
    res = compare_releases(plan, df)
    assert len(res.releases) == 2 and set(res.releases["privacy"]) == {"finite_outputs", "none"}
    assert res.releases.loc[0, "theory_basis"].startswith("at most C(n/2, k)")
    curve = coherence_curve(res.maxima)
    assert set(curve["split"]) == {"release", "null"}
    assert (curve.groupby(["release", "split"])["beta_hat"].apply(lambda s: s.is_monotonic_decreasing)).all()


def test_bad_inputs_raise_with_guidance():
    df = _fixture(300)
    ok = dict(seed=0, trials=1, n_jobs=1)
    with pytest.raises(ValueError, match="alpha"):
        coherence_audit(df, make_release("clear_half"), ["logistic"], "y", ["age"], ["sex"], alpha=0, **ok)
    with pytest.raises(ValueError, match="lens"):
        coherence_audit(df, make_release("clear_half"), ["logistic"], "y", [], ["sex"], **ok)
    with pytest.raises(ValueError, match="positive value"):
        coherence_audit(df, make_release("clear_half"), ["logistic"], "race", ["age"], ["sex"], **ok)
    with pytest.raises(ValueError, match="not a column"):
        coherence_audit(df, make_release("clear_half"), ["logistic"], "nope", ["age"], ["sex"], **ok)
    with pytest.raises(ValueError, match="Unknown adversary"):
        coherence_audit(df, make_release("clear_half"), ["psychic"], "y", ["age"], ["sex"], **ok)
    with pytest.raises(ValueError, match="same name"):
        coherence_audit(df, [make_release("clear_half"), make_release("clear_half")], ["logistic"], "y", ["age"],
                        ["sex"], **ok)


def test_inconsistent_with_declared_dp_is_flagged():
    """A release that leaks everything but declares a tiny epsilon must be caught by the check."""
    from core.coherence.releases import ClearHalf, PrivacyGuarantee

    class Liar(ClearHalf):
        key, label = "liar", "Clear half declared DP"

        @property
        def privacy(self):
            return PrivacyGuarantee("pure_dp", epsilon=1e-6, statement="claims 1e-6-DP")

    df = _fixture(3000)
    res = coherence_audit(df, Liar(), ["linkage"], "y", ["age", "sex", "region", "race"], ["sex"], alpha=0.5,
                          gamma=1000, trials=6, seed=0, n_jobs=1)
    row = res.summary.iloc[0]
    assert row["verdict"] == "FAIL" and "inconsistent with declared DP" in row["warnings"]


# ---- custom subgroups, neighbour convention, pooled null splits -------------------------------

def test_custom_subgroup_values_ranges_and_errors():
    df = _fixture(500)
    g = custom_subgroup(df, CustomSubgroup("", (Condition("sex", ("1",)), Condition("age", low=10, high=17))))
    assert g.name == "sex=1 & 10 <= age <= 17"
    assert np.array_equal(g.mask, ((df["sex"] == 1) & df["age"].between(10, 17)).to_numpy())
    two = custom_subgroup(df, CustomSubgroup("small races", (Condition("race", ("2", "3")),)))
    assert two.name == "small races" and two.mask.sum() == df["race"].isin([2, 3]).sum()
    with pytest.raises(ValueError, match="not values of 'race'"):
        custom_subgroup(df, CustomSubgroup("", (Condition("race", ("9",)),)))
    with pytest.raises(ValueError, match="not numeric"):
        custom_subgroup(df, CustomSubgroup("", (Condition("y", low=0, high=1),)))
    with pytest.raises(ValueError, match="empty"):
        Condition("age", low=5, high=1)
    with pytest.raises(ValueError, match="at least one condition"):
        CustomSubgroup("nobody", ())
    with pytest.raises(ValueError, match="at least one value"):
        Condition("race", ())


def test_custom_subgroups_join_the_audit_and_duplicates_are_refused():
    df = _fixture(2000)
    older_men = CustomSubgroup("older men", (Condition("sex", ("1",)), Condition("age", low=12, high=17)))
    plan = AuditPlan(target="y", positive="yes", lens=("age", "sex", "region"), subgroup_columns=("race",),
                     releases=(ReleaseChoice("clear_half"),), adversaries=(AdversaryChoice("nearest_neighbour"),),
                     subgroup_order=1, alpha=0.3, gamma=80, trials=4, custom_subgroups=(older_men,))
    res = compare_releases(plan, df)
    row = res.subgroups.set_index("subgroup").loc["older men"]
    assert row["size"] == int(((df["sex"] == 1) & df["age"].between(12, 17)).sum())
    clash = plan.replace(custom_subgroups=(CustomSubgroup("race=0", (Condition("race", ("0",)),)),))
    with pytest.raises(ValueError, match="defined twice"):
        compare_releases(clash, df)


def test_add_remove_tables_halve_the_noise_and_double_the_theory_epsilon():
    rep, ar = make_release("laplace_table", epsilon=1.0), make_release("laplace_table", epsilon=1.0, neighbour="add_remove")
    draws = {k: r.noise((200_000,), np.random.default_rng(0)) for k, r in (("rep", rep), ("ar", ar))}
    assert np.std(draws["rep"]) == pytest.approx(2 * np.sqrt(2), rel=0.02)   # Laplace scale 2: sd 2 sqrt 2
    assert np.std(draws["ar"]) == pytest.approx(np.sqrt(2), rel=0.02)
    assert ar.name == "Noisy table (Laplace) (epsilon=1.0, neighbour=add_remove)"
    # theory reads an add/remove eps as 2 eps replace-one: same gamma as a replace-one release at eps 2
    args = (20_000, 0.3, 0.05, 10)
    assert release_theory(ar.privacy, *args)[1] == release_theory(make_release("laplace_table", epsilon=2.0).privacy, *args)[1]
    g_rep, g_ar = make_release("gaussian_table", epsilon=1.0), make_release("gaussian_table", epsilon=1.0, neighbour="add_remove")
    assert g_rep.sigma == pytest.approx(np.sqrt(2) * g_ar.sigma) and g_ar.sigma == pytest.approx(1.0)
    with pytest.raises(ValueError, match="neighbour"):
        make_release("laplace_table", neighbour="swap")


def test_extra_null_splits_are_pooled_and_leave_the_real_split_alone():
    df = _fixture(1500)
    kw = dict(alpha=0.15, gamma=80, trials=40, n_jobs=1, subgroup_order=1)
    one = coherence_audit(df, make_release("clear_half"), ["random"], "y", ["age", "sex"], ["race", "sex"],
                          seed=4, n_null_splits=1, **kw)
    four = coherence_audit(df, make_release("clear_half"), ["random"], "y", ["age", "sex"], ["race", "sex"],
                           seed=4, n_null_splits=4, **kw)
    # the real split and the first null split are drawn from the same streams
    pd.testing.assert_frame_equal(one.maxima, four.maxima)
    s1, s4 = one.summary.iloc[0], four.summary.iloc[0]
    assert s1["beta_hat"] == s4["beta_hat"]
    assert s4["null_exceedances"] >= s1["null_exceedances"]
    assert s4["null_beta_hat"] == pytest.approx(s4["null_exceedances"] / (4 * 40))
    assert four.settings["n_null_splits"] == 4
