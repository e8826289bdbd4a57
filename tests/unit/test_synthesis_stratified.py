"""Stratified wrapper: parallel-composition ledger, DP size counts charged, no silent drops,
each stratum sampled from its own model, exact output sizes."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.synthesis.stratified import MERGED, StratifiedSynthesizer, largest_remainder
from core.synthesis.synthesizers import MST, IndependentMarginals


class Replay:
    """Test synthesizer: remembers its training rows and replays them, so every sampled row
    shows which training data (and so which stratum's model) produced it."""

    fitted: list = []

    def fit(self, df, domain, rho, rng):
        self.rows_, self.rho_ = df.reset_index(drop=True), rho
        Replay.fitted.append(self)
        return self

    def sample(self, n, rng):
        if len(self.rows_) == 0:
            return pd.DataFrame({c: np.zeros(n, np.int64) for c in self.rows_.columns})
        return self.rows_.iloc[rng.integers(0, len(self.rows_), n)].reset_index(drop=True)


def toy(rng, sizes=(400, 300, 200, 5, 0, 95)):
    """Strata g (3 values) x h (2 values); column 'tag' equals the stratum index, 'x' is noise."""
    keys = np.repeat(np.arange(6), sizes)
    df = pd.DataFrame({"g": keys // 2, "h": keys % 2, "tag": keys, "x": rng.integers(0, 3, keys.size)})
    return df.sample(frac=1, random_state=0).reset_index(drop=True), {"g": 3, "h": 2, "tag": 6, "x": 3}


def test_parallel_composition_spends_exactly_the_budget():
    df, dom = toy(np.random.default_rng(0))
    s = StratifiedSynthesizer(MST, ["g", "h"]).fit(df, dom, 0.5, np.random.default_rng(0))
    led = s.ledger_.to_frame()
    assert len(led) == 6 and (led["composition"] == "parallel").all()
    assert led["amount"].tolist() == pytest.approx([0.5] * 6)       # each stratum gets the full budget
    assert s.ledger_.total("rho") == pytest.approx(0.5)               # ... and they count once
    assert all(m.rho_ == pytest.approx(0.5) for m in s.models_.values())


def test_dp_size_counts_are_charged_and_the_rest_goes_to_strata():
    df, dom = toy(np.random.default_rng(0))
    rho, share = 0.4, 0.25
    s = StratifiedSynthesizer(MST, ["g", "h"], size_policy="dp_count", count_share=share).fit(
        df, dom, rho, np.random.default_rng(0))
    led = s.ledger_.to_frame()
    count = led[led["label"].str.startswith("stratum sizes")]
    assert len(count) == 1 and count["amount"].iloc[0] == pytest.approx(share * rho)
    assert s.count_sigma_ == pytest.approx(1 / math.sqrt(2 * share * rho))
    assert s.rho_per_stratum_ == pytest.approx((1 - share) * rho)
    assert s.ledger_.total("rho") == pytest.approx(rho)
    assert not np.array_equal(s.strata_["size_used"].to_numpy(), [400, 300, 200, 5, 0, 95])
    assert (s.strata_["size_used"] >= 0).all()


def test_no_stratum_silently_dropped_even_empty_ones():
    df, dom = toy(np.random.default_rng(0))
    s = StratifiedSynthesizer(IndependentMarginals, ["g", "h"]).fit(df, dom, 1.0, np.random.default_rng(0))
    # strata come from the public domain (3 x 2), including the empty one and the tiny one
    assert len(s.strata_) == 6 and (s.strata_["fate"] == "kept").all()
    assert len(s.models_) == 6
    assert s.strata_["size_used"].tolist() == [400, 300, 200, 5, 0, 95]


def test_small_strata_dropped_or_merged_only_by_choice():
    df, dom = toy(np.random.default_rng(0))
    kept = StratifiedSynthesizer(MST, ["g", "h"], min_size=50, small_action="keep").fit(
        df, dom, 1.0, np.random.default_rng(0))
    assert (kept.strata_["fate"] == "kept (small)").sum() == 2 and len(kept.models_) == 6
    dropped = StratifiedSynthesizer(MST, ["g", "h"], min_size=50, small_action="drop").fit(
        df, dom, 1.0, np.random.default_rng(0))
    assert (dropped.strata_["fate"] == "dropped").sum() == 2 and len(dropped.models_) == 4
    out = dropped.sample(1000, np.random.default_rng(1))
    assert not ((out["g"] == 1) & (out["h"] == 1)).any()          # the dropped stratum is absent
    merged = StratifiedSynthesizer(Replay, ["g", "h"], min_size=50, small_action="merge").fit(
        df, dom, 1.0, np.random.default_rng(0))
    assert MERGED in merged.models_ and len(merged.models_) == 5
    out = merged.sample(20000, np.random.default_rng(2))
    assert len(out) == 20000
    # the merged model can only emit rows of the merged strata (codes 3 and 4), with their own tags
    merged_rows = out[out["tag"].isin([3, 4])]
    assert len(merged_rows) == 100                                  # 5 of 1000 rows, scaled to 20000
    assert ((merged_rows["g"] * 2 + merged_rows["h"]) == merged_rows["tag"]).all()


def test_each_stratum_sampled_from_its_own_model():
    df, dom = toy(np.random.default_rng(0))
    Replay.fitted = []
    s = StratifiedSynthesizer(Replay, ["g", "h"]).fit(df, dom, 1.0, np.random.default_rng(0))
    # each model saw only its own stratum's rows, without the constant strata columns
    for key, m in s.models_.items():
        assert "g" not in m.rows_.columns and "h" not in m.rows_.columns
        flat = s.index_.flat_of(key)
        assert (m.rows_["tag"] == flat).all()
    out = s.sample(5000, np.random.default_rng(1))
    assert ((out["g"] * 2 + out["h"]) == out["tag"]).all()


def test_sample_has_exact_size_and_proportional_allocation():
    df, dom = toy(np.random.default_rng(0))
    s = StratifiedSynthesizer(IndependentMarginals, ["g", "h"]).fit(df, dom, 1.0, np.random.default_rng(0))
    out = s.sample(1001, np.random.default_rng(1))
    assert len(out) == 1001 and list(out.columns) == list(df.columns)
    counts = np.bincount(out["g"] * 2 + out["h"], minlength=6)
    assert np.abs(counts - np.array([400, 300, 200, 5, 0, 95]) * 1001 / 1000).max() < 1
    for c in df.columns:
        assert out[c].between(0, dom[c] - 1).all()


def test_public_sizes_given_by_user():
    df, dom = toy(np.random.default_rng(0))
    public = {"g=0|h=0": 1, "g=0|h=1": 1, "g=1|h=0": 1, "g=1|h=1": 1, "g=2|h=0": 1, "g=2|h=1": 1}
    s = StratifiedSynthesizer(IndependentMarginals, ["g", "h"], public_sizes=public).fit(
        df, dom, 1.0, np.random.default_rng(0))
    out = s.sample(600, np.random.default_rng(0))
    assert np.bincount(out["g"] * 2 + out["h"], minlength=6).tolist() == [100] * 6


def test_largest_remainder_sums_exactly():
    got = largest_remainder(np.array([1, 1, 1]), 10)
    assert got.sum() == 10 and sorted(got.tolist()) == [3, 3, 4]
    assert largest_remainder(np.array([0.0, 0.0]), 5).tolist() == [0, 0]


def test_bad_configurations_raise():
    df, dom = toy(np.random.default_rng(0))
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="not in the data"):
        StratifiedSynthesizer(MST, ["zz"]).fit(df, dom, 1.0, rng)
    with pytest.raises(ValueError, match="besides the strata"):
        StratifiedSynthesizer(MST, ["g", "h", "tag", "x"]).fit(df, dom, 1.0, rng)
    with pytest.raises(ValueError, match="size_policy"):
        StratifiedSynthesizer(MST, ["g"], size_policy="guess").fit(df, dom, 1.0, rng)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        StratifiedSynthesizer(MST, ["g"], size_policy="dp_count", count_share=1.0).fit(df, dom, 1.0, rng)
    with pytest.raises(ValueError, match="rho must be a positive"):
        StratifiedSynthesizer(MST, ["g"]).fit(df, dom, -1.0, rng)


def test_sample_share_reports_each_strata_part_of_the_output():
    df, dom = toy(np.random.default_rng(0))
    s = StratifiedSynthesizer(MST, ["g", "h"], min_size=50, small_action="drop").fit(
        df, dom, 1.0, np.random.default_rng(0))
    share = s.strata_.set_index("stratum")["sample_share"]
    assert share.sum() == pytest.approx(1.0)
    assert share["g=1|h=1"] == 0 and share["g=2|h=0"] == 0           # the dropped ones
    assert share["g=0|h=0"] == pytest.approx(400 / 995)


from hypothesis import given, settings, strategies as hst  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(n=hst.integers(0, 300), sizes=hst.tuples(hst.integers(1, 4), hst.integers(1, 3), hst.integers(1, 5)),
       rho=hst.floats(1e-3, 10.0), policy=hst.sampled_from(["public", "dp_count"]),
       seed=hst.integers(0, 2**16), n_out=hst.integers(0, 500))
def test_any_data_spends_exactly_rho_and_stays_in_domain(n, sizes, rho, policy, seed, n_out):
    rng = np.random.default_rng(seed)
    dom = {"s": sizes[0], "t": sizes[1], "x": sizes[2]}
    df = pd.DataFrame({c: rng.integers(0, k, n) for c, k in dom.items()})
    model = StratifiedSynthesizer(MST, ["s", "t"], size_policy=policy).fit(df, dom, rho, rng)
    assert model.ledger_.total("rho") == pytest.approx(rho)
    assert len(model.strata_) == sizes[0] * sizes[1]
    out = model.sample(n_out, rng)
    assert len(out) == (n_out if model.strata_["size_used"].sum() > 0 else 0)
    for c, k in dom.items():
        assert out[c].between(0, k - 1).all()


def four_strata():
    """Strata g x h (2 x 2) of 40, 30, 20 and 10 rows; 'tag' is the stratum index."""
    keys = np.repeat(np.arange(4), (40, 30, 20, 10))
    df = pd.DataFrame({"g": keys // 2, "h": keys % 2, "tag": keys, "x": keys % 3})
    return df, {"g": 2, "h": 2, "tag": 4, "x": 3}


class Rounds(Replay):
    """Replay that reports three rounds through ``progress`` like AIM and GEM do."""

    def fit(self, df, domain, rho, rng, progress=None):
        for r in range(1, 4):
            if progress is not None:
                progress(r, 3, f"round {r} of 3")
        return super().fit(df, domain, rho, rng)


def test_progress_reaches_each_stratum_fit_with_its_name():
    df, dom = four_strata()
    heard = []
    StratifiedSynthesizer(Rounds, ["g", "h"], progress=lambda *a: heard.append(a)).fit(
        df, dom, 1.0, np.random.default_rng(0))
    assert len(heard) == 4 * 3
    assert heard[0] == (1, 12, "stratum 1 of 4 (g=0|h=0): round 1 of 3")
    assert heard[-1] == (12, 12, "stratum 4 of 4 (g=1|h=1): round 3 of 3")
    assert [d for d, _, _ in heard] == list(range(1, 13))      # one bar over all strata


def test_fit_without_progress_parameter_is_reported_per_stratum():
    df, dom = four_strata()
    heard = []
    s = StratifiedSynthesizer(Replay, ["g", "h"]).fit(df, dom, 1.0, np.random.default_rng(0),
                                                     progress=lambda *a: heard.append(a))
    assert len(s.models_) == 4
    assert [(d, t) for d, t, _ in heard] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert heard[1][2] == "stratum 2 of 4 (g=0|h=1) fitted"


def test_cancel_from_a_stratum_round_stops_the_fit():
    from core.contracts import Cancelled

    df, dom = four_strata()

    def stop(done, total, message):
        if message.startswith("stratum 2"):
            raise Cancelled(message)
    Replay.fitted = []
    s = StratifiedSynthesizer(Rounds, ["g", "h"])
    with pytest.raises(Cancelled):
        s.fit(df, dom, 1.0, np.random.default_rng(0), progress=stop)
    assert len(Replay.fitted) == 1 and not hasattr(s, "models_")     # stratum 2 never finished


class Spender(Rounds):
    """Rounds that keeps a ledger like AIM and GEM: one-way marginals, then a selection and a
    measurement per round (a different number of rounds by stratum, as GEM's scaled rounds do)."""

    def fit(self, df, domain, rho, rng, progress=None):
        from core.privacy.ledger import BudgetLedger
        super().fit(df, domain, rho, rng, progress)
        rounds = 1 + int(df["tag"].iloc[0]) % 3 if len(df) else 1
        self.ledger_ = BudgetLedger()
        self.ledger_.spend("one-way marginals", rho / 2, "rho", measured="one-way tables, sigma 1")
        for r in range(rounds):
            self.ledger_.spend(f"round {r + 1}: selection", rho / 10 / rounds, "rho", measured="a pick")
            self.ledger_.spend(f"round {r + 1}: measurement", 0.4 * rho / rounds, "rho", measured="a table")
        return self


def test_every_spend_of_each_stratum_is_in_the_ledger_in_parallel():
    df, dom = four_strata()
    rho, share = 0.5, 0.2
    heard = []
    labels = {"g": ["Female", "Male"], "h": ["young", "old"], "tag": list("abcd"), "x": list("xyz")}
    s = StratifiedSynthesizer(Spender, ["g", "h"], size_policy="dp_count", count_share=share, labels=labels,
                              progress=lambda *a: heard.append(a)).fit(df, dom, rho, np.random.default_rng(0))
    assert heard[0][2] == "stratum 1 of 4 (Female · young): round 1 of 3"
    spends = s.ledger_.spends
    strata = [x for x in spends if x.composition == "parallel"]
    for key, model in s.models_.items():
        own = [x for x in strata if x.part == key]
        name = s.names_[key]
        assert [x.label for x in own] == [f"stratum {name}: {y.label}" for y in model.ledger_.spends]
        assert [x.measured for x in own] == [y.measured for y in model.ledger_.spends]
        assert sum(x.amount for x in own) == pytest.approx((1 - share) * rho, abs=1e-12)
    assert len({len([x for x in strata if x.part == k]) for k in s.models_}) > 1   # uneven rounds by stratum
    assert {x.group for x in strata} == {"strata"}
    # one stratum's budget plus the counts' share: the full rho, never more, never less
    assert s.ledger_.total("rho") == pytest.approx(rho, abs=1e-9)
    assert "4 disjoint parts" in s.ledger_.statement()


def test_a_stratum_fit_that_leaves_budget_unspent_is_still_charged_it():
    df, dom = four_strata()

    class Thrifty(Replay):
        def fit(self, df, domain, rho, rng):
            from core.privacy.ledger import BudgetLedger
            super().fit(df, domain, rho, rng)
            self.ledger_ = BudgetLedger()
            self.ledger_.spend("one-way marginals", rho / 4, "rho")
            return self

    s = StratifiedSynthesizer(Thrifty, ["g", "h"], min_size=15, small_action="merge").fit(
        df, dom, 0.8, np.random.default_rng(0))
    led = s.ledger_.to_frame()
    assert led["label"].str.endswith("budget set aside but not spent").sum() == len(s.models_)
    assert f"{MERGED}: one-way marginals" in set(led["label"])     # the merged strata's own model
    assert s.ledger_.total("rho") == pytest.approx(0.8, abs=1e-12)
