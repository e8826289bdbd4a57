"""Allocation JSON exchange and budget conversions."""
import json
import math

import numpy as np
import pytest

from core.census.allocation import Allocation
from core.privacy.accounting import rho_for_epsilon
from core.privacy.accounting import epsilon_to_rho, rho_to_epsilon


def test_round_trip_and_helpers():
    a = Allocation(("state", "county", "block"), (0.1, 0.3, 0.6), "epsilon", "laplace")
    b = Allocation.from_json(a.to_json())
    assert b == a
    assert a.total == pytest.approx(1.0)
    np.testing.assert_allclose(a.eps_by_level, [0.1, 0.3, 0.6])
    assert Allocation.from_json(a.to_json(), level_names=("state", "county", "block")) == a


def test_rho_allocation_states_epsilon_delta():
    a = Allocation(("state", "block"), (0.1, 0.4), "rho", "gaussian", 1.4142, 1e-6)
    assert a.epsilon_total() == pytest.approx(rho_to_epsilon(0.5, 1e-6))
    assert Allocation.from_json(a.to_json()).delta == 1e-6


@pytest.mark.parametrize("text,match", [
    ("not json", "not valid JSON"),
    (json.dumps({"a": 1}), "not a budget allocation"),
    (json.dumps({"format": "census-budget-allocation", "budgets": [1]}), "missing"),
    (json.dumps({"format": "census-budget-allocation", "level_names": ["a", "b"], "budgets": [1],
                 "unit": "epsilon", "mechanism": "laplace"}), "one budget per level"),
    (json.dumps({"format": "census-budget-allocation", "level_names": ["a"], "budgets": [1],
                 "unit": "rho", "mechanism": "laplace"}), "calibrated in epsilon"),
    (json.dumps({"format": "census-budget-allocation", "level_names": ["a"], "budgets": [-1],
                 "unit": "epsilon", "mechanism": "laplace"}), "positive"),
])
def test_bad_json_messages(text, match):
    with pytest.raises(ValueError, match=match):
        Allocation.from_json(text)


def test_mismatched_levels_message():
    a = Allocation(("state", "block"), (0.5, 0.5), "epsilon", "geometric")
    with pytest.raises(ValueError, match="this geography has"):
        Allocation.from_json(a.to_json(), level_names=("state", "county", "block"))


def test_conversion_round_trips():
    for eps in (0.1, 1.0, 4.0):
        assert rho_to_epsilon(rho_for_epsilon(eps, 1e-6), 1e-6) == pytest.approx(eps, rel=1e-9)
        rho = epsilon_to_rho(eps)
        assert rho == pytest.approx(eps ** 2 / 2)
    # pure epsilon-DP implies eps^2/2-zCDP, whose tight conversion is at least eps for small delta
    assert rho_to_epsilon(epsilon_to_rho(1.0), 1e-6) > 1.0
    assert math.isfinite(rho_to_epsilon(0.01, 1e-10))


def test_an_allocation_given_its_mechanism_keeps_it_and_stores_only_the_id():
    """The built mechanism is kept for the allocation's own use; equality, digests, cache keys and the JSON
    see only the id, so an allocation made from the object equals one made from the text."""
    import joblib

    from core.census.allocation import Allocation
    from core.contracts import digest_of
    from core.privacy.mechanisms import AnalyticGaussianParams, get_mechanism
    mech = get_mechanism("analytic_gaussian", AnalyticGaussianParams(delta=1e-7))
    given = Allocation(("state", "county"), (0.4, 0.6), "epsilon", mech)
    text = Allocation(("state", "county"), (0.4, 0.6), "epsilon", mech.id)
    assert given.noise is mech and given.mechanism == "analytic_gaussian[delta=1e-07]"
    assert given == text and digest_of(given) == digest_of(text) and joblib.hash(given) == joblib.hash(text)
    assert Allocation.from_json(given.to_json()) == given


def test_a_pickled_allocation_keeps_its_mechanism_as_key_and_params_and_its_cache_key(monkeypatch):
    """A copy or a disk-cached allocation carries the mechanism's key and Params (no functions), rebuilds the
    same mechanism from them without parsing the id, and hashes as the allocation made from the id does,
    whichever mechanism object it was built with."""
    import copy
    import pickle

    import joblib

    from core.census.allocation import Allocation
    from core.privacy import mechanisms
    from core.privacy.mechanisms import MECHANISMS, AnalyticGaussianParams, get_mechanism
    params = AnalyticGaussianParams(delta=1e-7)
    mech = get_mechanism("analytic_gaussian", params)
    other = MECHANISMS["analytic_gaussian"].build(params)       # same mechanism, other function objects
    given = Allocation(("state", "county"), (0.4, 0.6), "epsilon", mech, delta=2e-7)
    rebuilt = Allocation(("state", "county"), (0.4, 0.6), "epsilon", other, delta=2e-7)
    text = Allocation(("state", "county"), (0.4, 0.6), "epsilon", mech.id, delta=2e-7)
    parsed = []
    real = mechanisms.parse_mechanism_id
    monkeypatch.setattr(mechanisms, "parse_mechanism_id", lambda t: parsed.append(t) or real(t))
    back = pickle.loads(pickle.dumps(given))
    copied = copy.deepcopy(given)
    for loaded in (back, copied):
        assert loaded.noise is mech and loaded == given
        assert loaded.total_delta == pytest.approx(2e-7) and loaded.ledger().level_delta == 1e-7
    assert joblib.hash(given) == joblib.hash(rebuilt) == joblib.hash(text) == joblib.hash(back)
    assert parsed == []
