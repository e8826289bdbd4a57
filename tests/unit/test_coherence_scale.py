"""The audit's work per trial does not grow with the people twice: counts of work, not timings.

Each trial's distances come from per-(subgroup, lens cell) counts built once per split, the class of
each person is found once per audit, the data travel to a cluster once per audit (not once per
task), and a fixed seed gives the numbers it gave before the counts were shared.
"""
import pickle

import numpy as np
import pytest

import core.coherence.audit as audit_mod
from core.cluster import split_shared
from core.coherence.audit import coherence_audit
from core.coherence.releases import make_release
from core.coherence.wasserstein import SideCounts, cell_distances, count_distances, member_pairs
from core.datasets import load_dataset

LENS = ["age_band", "education", "race", "sex"]


def _audit(df, trials=3, **kw):
    return coherence_audit(df, [make_release("clear_half"), make_release("laplace_table", epsilon=1.0)],
                           ["logistic", "naive_bayes", "nearest_neighbour"], "income", LENS, ["race", "sex"],
                           gamma=40, trials=trials, seed=11, n_jobs=1, **kw)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counts_give_the_per_membership_distances_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    n, U, G = 4000, 300, 7
    cell = rng.integers(0, U, n)
    members = rng.random((n, G)) < np.linspace(0.05, 0.9, G)
    halves = np.zeros((3, n), bool)
    for j in range(3):
        halves[j, rng.choice(n, n // 2, replace=False)] = True
    scores = np.round(rng.uniform(-1, 1, U), 2)          # ties on purpose
    old = cell_distances(scores, cell, halves, members, member_pairs(cell, members))
    counts = SideCounts(cell, members, U)
    new = count_distances(scores, [counts.released(h) for h in halves])
    for a, b in zip(old, new):
        assert np.array_equal(a, b, equal_nan=True)
    # a half given by its row numbers counts the same as its mask
    idx = np.flatnonzero(halves[0])
    assert all(np.array_equal(x, y) for x, y in zip(counts.released(idx), counts.released(halves[0])))


def test_classes_merge_people_with_the_same_cell_and_subgroups():
    cell = np.array([0, 0, 1, 1, 1, 2])
    members = np.array([[1, 0], [1, 0], [1, 1], [1, 1], [1, 0], [0, 0]], bool)
    counts = SideCounts(cell, members, 3)
    assert counts.n_classes == 4                                   # (0,10) (1,11) (1,10) (2,00)
    assert counts.totals.tolist() == [[2, 3, 0], [0, 2, 0]]
    ca, cb = counts.released(np.array([0, 2, 5]))
    assert ca.tolist() == [[1, 1, 0], [0, 1, 0]] and cb.tolist() == [[1, 2, 0], [0, 1, 0]]


@pytest.mark.slow
def test_people_are_classed_once_per_audit_whatever_the_trials(monkeypatch):
    built = []
    real = audit_mod.SideCounts

    def counting(*args, **kw):
        built.append(args[0].size)
        return real(*args, **kw)

    monkeypatch.setattr(audit_mod, "SideCounts", counting)
    df = load_dataset("cps").iloc[:800].reset_index(drop=True)
    _audit(df, trials=1)
    _audit(df, trials=4)
    assert built == [800, 800]


@pytest.mark.slow
def test_the_data_are_shipped_once_per_audit_not_once_per_task(monkeypatch):
    """On a cluster, the codes, the people's classes and the lens cells are scattered once; every
    task carries only references and its trial numbers, so a task's bytes do not grow with the rows."""
    seen = {}
    real = audit_mod.map_trials

    def recording(func, items, **kw):
        skeleton, skeletons, shipments = split_shared(func, items)
        seen.setdefault("tasks", []).append(max(len(pickle.dumps(s)) for s in skeletons))
        seen.setdefault("shipped", []).append(sum(len(s.payload) for s in shipments))
        seen.setdefault("items", []).append(len(items))
        return real(func, items, **kw)

    monkeypatch.setattr(audit_mod, "map_trials", recording)
    cps = load_dataset("cps")
    for n in (10_000, 20_000):
        _audit(cps.iloc[:n].reset_index(drop=True), trials=3)
    small, large = seen["tasks"]
    assert small < 64_000 and large < 64_000                   # references, not data
    assert large < 1.2 * small                                 # twice the rows, (almost) the same task
    per_row = [b / n for b, n in zip(seen["shipped"], (10_000, 20_000))]
    assert per_row[1] == pytest.approx(per_row[0], rel=0.25)   # the data once: bytes grow with the rows ...
    assert per_row[1] < 200                                    # ... about 150 bytes a row, sent once, not per task


def test_a_fixed_seed_gives_the_numbers_it_always_gave():
    """Figures computed before the per-split counts were shared (same seed, same rows)."""
    res = _audit(load_dataset("cps").iloc[:3000].reset_index(drop=True))
    d = res.maxima["D"].to_numpy()
    assert d[:6] == pytest.approx([0.14004234496598197, 0.23306139469199358, 0.6538461538461537,
                                   0.07773091908204396, 0.12138540151746792, 0.27011403037170434], abs=1e-12)
    assert res.maxima["D_null"].to_numpy()[-3:] == pytest.approx(
        [0.04403818076509644, 0.07812915042227266, 0.31503756245290315], abs=1e-12)
    assert float(res.trials["w1"].sum()) == pytest.approx(15.869212692698088, abs=1e-9)
