"""MST and independent marginals: budget accounting, tree structure, exactness at huge rho, sampling."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.synthesis.encoding import decode_categories, encode_categories
from core.synthesis.marginals import normalise, project_to_simplex, tvd, two_way_counts
from core.synthesis.metrics import two_way_tvd
from core.synthesis.registry import SYNTHESIZERS, make_synthesizer
from core.synthesis.synthesizers import MST, IndependentMarginals


class RecordingRng:
    """Delegates to a real generator and records the scale of every Gaussian draw."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)
        self.normal_calls: list[tuple[float, int]] = []

    def normal(self, loc, scale, size):
        self.normal_calls.append((float(scale), int(np.prod(size))))
        return self._rng.normal(loc, scale, size)

    def __getattr__(self, name):
        return getattr(self._rng, name)


def chain_data(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    """Columns a -> b -> c strongly dependent, d independent noise: the best tree holds a-b and b-c."""
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.9, a, rng.integers(0, 4, n))
    c = np.where(rng.random(n) < 0.9, b % 3, rng.integers(0, 3, n))
    d = rng.integers(0, 2, n)
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d}), {"a": 4, "b": 4, "c": 3, "d": 2}


@pytest.fixture(scope="module")
def chain():
    return chain_data(20000, np.random.default_rng(1))


def test_mst_spends_exactly_rho_in_thirds(chain):
    df, dom = chain
    rho, d = 0.3, df.shape[1]
    rng = RecordingRng(3)
    m = MST().fit(df, dom, rho, rng)
    assert sum(m.budget_split_.values()) == pytest.approx(rho)
    assert all(v == pytest.approx(rho / 3) for v in m.budget_split_.values())
    # Gaussian releases: one histogram (L2 sensitivity 1) per normal() call
    scales = [s for s, _ in rng.normal_calls]
    assert len(scales) == d + (d - 1)
    gaussian_rho = sum(1 / (2 * s * s) for s in scales)
    em_rho = (d - 1) * m.epsilon_em_ ** 2 / 8          # each exponential-mechanism pick is eps^2/8-zCDP
    assert gaussian_rho == pytest.approx(2 * rho / 3)
    assert em_rho == pytest.approx(rho / 3)
    assert gaussian_rho + em_rho == pytest.approx(rho)
    assert m.sigma_one_way_ == pytest.approx(math.sqrt(d / (2 * rho / 3)))
    assert m.sigma_two_way_ == pytest.approx(math.sqrt((d - 1) / (2 * rho / 3)))


def test_independent_marginals_spends_rho(chain):
    df, dom = chain
    rng = RecordingRng(0)
    IndependentMarginals().fit(df, dom, 0.2, rng)
    assert sum(1 / (2 * s * s) for s, _ in rng.normal_calls) == pytest.approx(0.2)


def test_tree_is_spanning_and_finds_the_chain(chain):
    df, dom = chain
    m = MST().fit(df, dom, 50.0, np.random.default_rng(0))
    d = df.shape[1]
    assert len(m.edges_) == d - 1
    parent = list(range(d))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x
    for i, j in m.edges_:
        ri, rj = find(i), find(j)
        assert ri != rj, "MST edges contain a cycle"
        parent[ri] = rj
    assert len({find(i) for i in range(d)}) == 1
    named = {frozenset(e) for e in m.tree_edges_}
    assert frozenset(("a", "b")) in named and frozenset(("b", "c")) in named
    assert set(m.order_) == set(range(d)) and len(m.parent_) == d - 1


def test_huge_rho_recovers_tree_marginals_exactly(chain):
    df, dom = chain
    m = MST().fit(df, dom, 1e10, np.random.default_rng(0))
    for a, b in m.tree_edges_:
        real = normalise(two_way_counts(df[a].to_numpy(), df[b].to_numpy(), dom[a], dom[b]))
        assert np.abs(m.model_two_way(a, b) - real).max() < 1e-4
    synth = m.sample(200000, np.random.default_rng(1))
    for a, b in m.tree_edges_:
        real = two_way_counts(df[a].to_numpy(), df[b].to_numpy(), dom[a], dom[b])
        fake = two_way_counts(synth[a].to_numpy(), synth[b].to_numpy(), dom[a], dom[b])
        assert tvd(real, fake) < 0.01


def test_ancestral_sampling_matches_model_with_compression():
    rng = np.random.default_rng(5)
    n = 3000
    a = rng.choice(6, n, p=[0.5, 0.3, 0.17, 0.01, 0.01, 0.01])
    b = np.where(rng.random(n) < 0.8, a % 3, rng.integers(0, 3, n))
    df, dom = pd.DataFrame({"a": a, "b": b}), {"a": 6, "b": 3}
    m = MST().fit(df, dom, 0.05, np.random.default_rng(2))
    assert m.rare_[0].size >= 1, "rare values of a should be merged at this budget"
    synth = m.sample(300000, np.random.default_rng(3))
    model = m.model_two_way("a", "b")
    emp = normalise(two_way_counts(synth["a"].to_numpy(), synth["b"].to_numpy(), 6, 3))
    assert np.abs(emp - model).max() < 0.006
    assert model.sum() == pytest.approx(1.0) and (model >= 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(SYNTHESIZERS))
def test_samples_have_declared_domain(key, chain):
    df, dom = chain
    dom = {**dom, "a": 7}  # a public value never seen in the data stays possible, never out of range
    m = make_synthesizer(key).fit(df, dom, 0.01, np.random.default_rng(0))
    out = m.sample(5000, np.random.default_rng(1))
    assert list(out.columns) == list(df.columns) and len(out) == 5000
    for c in df.columns:
        assert out[c].between(0, dom[c] - 1).all()


def test_marginal_error_shrinks_with_epsilon(chain):
    df, dom = chain
    small = df.iloc[:4000]

    def err(rho):
        vals = []
        for seed in range(4):
            s = MST().fit(small, dom, rho, np.random.default_rng(seed)).sample(4000, np.random.default_rng(seed + 9))
            vals.append(two_way_tvd(small, s, dom)["tvd"].mean())
        return np.mean(vals)
    errors = [err(r) for r in (1e-5, 1e-3, 1e-1)]
    assert errors[0] > errors[1] > errors[2]


def test_bad_inputs_raise_clear_errors(chain):
    df, dom = chain
    with pytest.raises(ValueError, match="rho must be a positive"):
        MST().fit(df, dom, 0.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="outside the declared domain"):
        MST().fit(df, {**dom, "a": 2}, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="No domain size"):
        IndependentMarginals().fit(df, {"a": 4}, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="Unknown synthesizer"):
        make_synthesizer("gan")


def test_single_column_spends_all_on_histogram():
    df = pd.DataFrame({"x": np.repeat([0, 1, 2], [100, 50, 10])})
    m = MST().fit(df, {"x": 3}, 1e8, np.random.default_rng(0))
    assert m.budget_split_["one-way marginals"] == pytest.approx(1e8)
    out = m.sample(16000, np.random.default_rng(0))
    assert np.bincount(out["x"], minlength=3) / 16000 == pytest.approx([100 / 160, 50 / 160, 10 / 160], abs=0.02)


def test_encoding_round_trip_keeps_declared_categories():
    df = pd.DataFrame({"s": pd.Categorical(["a", "b", "a"], categories=["a", "b", "z"]), "n": [3, 1, 3]})
    codes, dom, labels = encode_categories(df)
    assert dom == {"s": 3, "n": 2} and codes["n"].tolist() == [1, 0, 1]
    back = decode_categories(codes, labels)
    assert back["s"].tolist() == ["a", "b", "a"] and list(back["s"].cat.categories) == ["a", "b", "z"]
    with pytest.raises(ValueError, match="missing values"):
        encode_categories(pd.DataFrame({"x": [1.0, None]}))
    with pytest.raises(ValueError, match="outside its domain"):
        decode_categories(pd.DataFrame({"s": [5]}), {"s": ["a"]})


def test_simplex_projection():
    v = np.array([3.0, -1.0, 0.5])
    p = project_to_simplex(v, 2.0)
    assert p.sum() == pytest.approx(2.0) and (p >= 0).all()
    assert p == pytest.approx([2.0, 0.0, 0.0])
