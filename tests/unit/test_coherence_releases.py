"""Release registry with declared guarantees, release behaviour, and adversaries' score contract."""
import math

import numpy as np
import pandas as pd
import pytest

from core.coherence.adversaries import ADVERSARIES, checked_scores, make_adversary, training_set
from core.coherence.audit import release_theory
from core.coherence.releases import (RELEASES, AuditSchema, MicrodataReport, TableReport, encode_for_audit,
                                     is_private, make_release, synthesizers, table_counts)
from core.privacy.accounting import epsilon_to_rho


def _half(n=400, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"a": rng.integers(0, 4, n), "b": rng.integers(0, 3, n), "s": rng.integers(0, 2, n),
                       "y": rng.integers(0, 2, n)})
    codes, domain, labels = encode_for_audit(df, list(df.columns))
    schema = AuditSchema(domain, labels, ("a", "b"), "y", 1)
    return codes, schema


def test_registry_lists_every_synthesizer_pooled_and_stratified():
    for key in synthesizers():
        assert f"synth_{key}" in RELEASES and f"strat_{key}" in RELEASES
        assert is_private(f"synth_{key}") and is_private(f"strat_{key}")
    assert not is_private("clear_half") and not is_private("suppression") and not is_private("clear_sample")
    assert {"clear_half", "clear_sample", "suppression", "laplace_table", "gaussian_table"} <= set(RELEASES)


def test_every_release_declares_its_guarantee():
    expect = {"clear_half": "none", "clear_sample": "finite_outputs", "suppression": "none",
              "laplace_table": "pure_dp", "gaussian_table": "zcdp"}
    for key, spec in RELEASES.items():
        params = {"strata": ("s",)} if hasattr(spec.params(), "strata") else {}
        g = make_release(key, **params).privacy
        assert g.kind == expect.get(key, "zcdp"), key
        assert g.statement
    lap = make_release("laplace_table", epsilon=0.5).privacy
    assert lap.epsilon == 0.5 and lap.neighbour == "replace_one"
    gau = make_release("gaussian_table", epsilon=0.5)
    assert gau.privacy.rho == pytest.approx(epsilon_to_rho(0.5)) == pytest.approx(0.125)
    assert gau.sigma == pytest.approx(math.sqrt(2) / math.sqrt(2 * 0.125))      # L2 sensitivity sqrt 2
    syn = make_release("synth_mst", epsilon=2.0).privacy
    assert syn.rho == pytest.approx(2.0) and syn.neighbour == "add_remove"


def test_theory_per_guarantee():
    res, basis, _ = release_theory(make_release("laplace_table", epsilon=0.01).privacy, 200_000, 0.5, 0.05, 10)
    assert res.gamma == pytest.approx(2503.57, abs=0.01) and "Thm 7" in basis
    none, basis, fn = release_theory(make_release("clear_half").privacy, 1000, 0.5, 0.05, 10)
    assert none.gamma is None and fn is None and "no privacy guarantee" in basis
    big, basis, _ = release_theory(make_release("synth_mst", epsilon=1.0).privacy, 1000, 0.5, 0.05, 10)
    assert big.gamma is None and "outside theorem" in basis
    tiny, basis, _ = release_theory(make_release("gaussian_table", epsilon=1e-5).privacy, 10**5, 1.0, 0.05, 10)
    assert tiny.gamma is not None and "Thm 8" in basis


def test_clear_releases():
    codes, schema = _half()
    rng = np.random.default_rng(1)
    r = make_release("clear_half").bind(schema).release(codes, rng)
    pd.testing.assert_frame_equal(r.rows, codes.reset_index(drop=True))
    k = make_release("clear_sample", k=25).bind(schema).release(codes, rng)
    assert len(k.rows) == 25 and len(k.rows.merge(codes.drop_duplicates(), how="inner")) >= 25
    with pytest.raises(ValueError, match="at least 1"):
        make_release("clear_sample", k=0)
    with pytest.raises(ValueError, match="records published"):
        make_release("clear_sample", k=0)


def test_suppression_blanks_rare_cells_and_generalised_columns():
    codes, schema = _half()
    out = make_release("suppression", k=40).bind(schema).release(codes, np.random.default_rng(0)).rows
    cell = codes["a"].astype(str) + "|" + codes["b"].astype(str)
    rare = cell.map(cell.value_counts()) < 40
    assert (out.loc[rare.to_numpy(), "a"] == schema.domain["a"]).all()
    assert (out.loc[~rare.to_numpy(), ["a", "b"]].to_numpy() == codes.loc[~rare, ["a", "b"]].to_numpy()).all()
    gen = make_release("suppression", k=1, generalise=("b",)).bind(schema).release(codes, np.random.default_rng(0)).rows
    assert (gen["b"] == schema.domain["b"]).all() and (gen["a"] == codes["a"]).all()
    with pytest.raises(ValueError, match="lens columns"):
        make_release("suppression", generalise=("y",)).bind(schema)


def test_tables_count_on_the_public_domain_and_add_noise():
    codes, schema = _half()
    exact = table_counts(codes, schema)
    assert exact.shape == (np.prod(schema.lens_sizes), 2) and exact.sum() == len(codes)
    assert exact[:, 1].sum() == (codes["y"] == 1).sum()
    draws = np.stack([make_release("laplace_table", epsilon=0.5).bind(schema).release(codes, np.random.default_rng(s)).counts
                      for s in range(30)]) - exact
    assert draws.std() == pytest.approx(math.sqrt(2) * 2 / 0.5, rel=0.1)   # Laplace scale 2/eps
    wide = AuditSchema({"a": 2000, "b": 2000, "y": 2}, {}, ("a", "b"), "y", 1)
    with pytest.raises(ValueError, match="fewer or coarser lens"):
        table_counts(pd.DataFrame({"a": [0], "b": [0], "y": [1]}), wide)


@pytest.mark.slow
@pytest.mark.parametrize("key", [k for k in RELEASES if k.startswith(("synth_", "strat_"))])
def test_synthesizer_releases_return_microdata_of_half_size(key):
    codes, schema = _half()
    params = {"strata": ("s",)} if key.startswith("strat_") else {}
    rel = make_release(key, epsilon=1.0, **params).bind(schema)
    rep = rel.release(codes, np.random.default_rng(0))
    assert isinstance(rep, MicrodataReport) and len(rep.rows) == len(codes)
    for c in rep.rows.columns:
        assert rep.rows[c].between(0, schema.domain[c] - 1).all()


def test_unknown_release_and_params():
    with pytest.raises(ValueError, match="Unknown release"):
        make_release("magic")
    with pytest.raises(ValueError, match="no parameter"):
        make_release("clear_half", epsilon=1.0)
    codes, schema = _half()
    with pytest.raises(ValueError, match="strata column"):
        make_release("strat_mst", epsilon=1.0).bind(schema)


def test_encode_for_audit_rejects_wide_or_missing_columns():
    df = pd.DataFrame({"id": np.arange(400), "g": ["x"] * 400, "m": [None] + ["a"] * 399})
    with pytest.raises(ValueError, match="distinct values"):
        encode_for_audit(df, ["id"])
    with pytest.raises(ValueError, match="missing values"):
        encode_for_audit(df, ["m"])
    with pytest.raises(ValueError, match="not in the data"):
        encode_for_audit(df, ["zzz"])


@pytest.mark.slow
@pytest.mark.parametrize("adv", sorted(ADVERSARIES))
def test_adversaries_give_deterministic_scores_in_range_on_both_report_kinds(adv):
    codes, schema = _half()
    grid = np.array([[a, b] for a in range(schema.lens_sizes[0]) for b in range(schema.lens_sizes[1])])
    reports = [MicrodataReport(codes), TableReport(table_counts(codes, schema) + np.random.default_rng(0).normal(0, 2, (len(grid), 2)))]
    for rep in reports:
        h = make_adversary(adv).fit(rep, schema, np.random.default_rng(0))
        s1, s2 = h(grid), h(grid)
        assert s1.shape == (len(grid),) and np.all(np.abs(s1) <= 1) and np.array_equal(s1, s2)


def test_memorising_adversaries_read_the_release():
    codes, schema = _half()
    rep = MicrodataReport(codes.iloc[:10])
    present = codes.iloc[:10][["a", "b"]].to_numpy()
    absent = np.array([[schema.domain["a"], schema.domain["b"]]])      # suppressed code never appears
    link = make_adversary("linkage").fit(rep, schema, np.random.default_rng(0))
    assert np.all(link(present) == 1.0) and link(absent)[0] == -1.0
    nn = make_adversary("nearest_neighbour").fit(rep, schema, np.random.default_rng(0))
    assert nn(absent)[0] == 0.0
    one = MicrodataReport(codes.iloc[:1])
    y0 = 1.0 if codes.iloc[0]["y"] == 1 else -1.0
    assert make_adversary("nearest_neighbour").fit(one, schema, None)(present[:1])[0] == y0
    x, y, w = training_set(TableReport(np.array([[2.0, -1.0]] + [[0.0, 0.0]] * 11)), schema)
    assert x.tolist() == [[0, 0]] and y.tolist() == [0] and w.tolist() == [2.0]


def test_checked_scores():
    assert checked_scores(np.array([1 + 1e-12, -0.5]), "h").tolist() == [1.0, -0.5]
    with pytest.raises(ValueError, match="outside"):
        checked_scores(np.array([1.1]), "h")
    with pytest.raises(ValueError, match="non-finite"):
        checked_scores(np.array([np.nan]), "h")


def test_nearest_neighbour_confidence_falls_with_hamming_distance():
    schema = AuditSchema({"a": 4, "b": 3, "y": 2}, {}, ("a", "b"), "y", 1)
    rep = MicrodataReport(pd.DataFrame({"a": [0], "b": [0], "y": [1]}))
    h = make_adversary("nearest_neighbour", tau=3.0).fit(rep, schema, np.random.default_rng(0))
    np.testing.assert_allclose(h(np.array([[0, 0], [1, 0], [1, 1]])), [1.0, 2 / 3, 1 / 3])


def test_synthesizer_settings_reach_the_synthesizer_and_the_name():
    """A synthesizer's own Params are part of its release's Params: none silently stays at its default."""
    import dataclasses
    for key, spec in synthesizers().items():
        own = {f.name for f in dataclasses.fields(spec.params)}
        for prefix in ("synth_", "strat_"):
            fields = {f.name for f in dataclasses.fields(RELEASES[prefix + key].params)}
            assert own <= fields and "epsilon" in fields
    if "compress" in {f.name for f in dataclasses.fields(synthesizers()["mst"].params)}:
        rel = make_release("synth_mst", epsilon=1.0, compress=False)
        assert rel.factory().compress is False
        assert rel.name == "MST (maximum spanning tree), pooled (zCDP epsilon=1.0, compress=False)"


def test_zcdp_releases_spend_and_say_rho_is_epsilon_squared_over_two():
    """The audit's epsilon for the Gaussian table and every synthesizer is a zCDP epsilon, labelled so,
    and the fit receives exactly the rho the guarantee (and so the theory and the ledger) states."""
    import dataclasses

    from core.coherence.releases import ZCDP_EPSILON_LABEL
    from core.privacy.accounting import rho_for_epsilon

    assert ZCDP_EPSILON_LABEL == "zCDP epsilon (rho = epsilon^2/2)"
    page_rho = rho_for_epsilon(1.0, 1e-9)
    for key in [k for k in RELEASES if k.startswith(("synth_", "strat_"))] + ["gaussian_table"]:
        field = next(f for f in dataclasses.fields(RELEASES[key].params) if f.name == "epsilon")
        assert field.metadata["label"] == ZCDP_EPSILON_LABEL, key
        assert "rho = epsilon^2 / 2" in field.metadata["help"] and f"{page_rho:.3f}" in field.metadata["help"]
        rel = make_release(key, epsilon=1.0, **({"strata": ("s",)} if key.startswith("strat_") else {}))
        assert rel.privacy.rho == pytest.approx(0.5)
        assert "zCDP epsilon 1" in rel.privacy.statement and "zCDP epsilon=1.0" in rel.name
    lap = RELEASES["laplace_table"]
    assert next(f for f in dataclasses.fields(lap.params) if f.name == "epsilon").metadata["label"] == "epsilon"
    assert "zCDP" not in make_release("laplace_table", epsilon=1.0).name
    # the synthesizer is fitted at the stated rho, not at another conversion of the same epsilon
    codes, schema = _half()
    rel = make_release("synth_independent", epsilon=0.3).bind(schema)
    seen = []
    real = rel.factory

    def spy():
        model = real()
        fit = model.fit

        def recording(df, domain, rho, rng, *a, **kw):
            seen.append(rho)
            return fit(df, domain, rho, rng, *a, **kw)
        model.fit = recording
        return model
    rel.factory = spy
    rel.release(codes, np.random.default_rng(0))
    assert seen == [pytest.approx(0.045)] and seen[0] == pytest.approx(rel.privacy.rho)
