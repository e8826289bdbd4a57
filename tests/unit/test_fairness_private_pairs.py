"""Pairs drawn from a private synthetic copy: plan checks, the spend, reproducibility, what cards
show, and the learner with constraint people outside the training data (zero-cost augmentation)."""
import math

import numpy as np
import pandas as pd
import pytest

from core.fairness.elicitation import (DISPLAYABLE_FEATURES, SessionConfig, core_pairs, pair_card,
                                       population_rows)
from core.fairness.elicitation_plan import ElicitationPlan, run_elicitation, session_people
from core.fairness.private_pairs import (BIN_EDGES, PAIR_DELTA, SYNTHETIC_PEOPLE, PrivatePairsPlan,
                                         bin_labels, card_categories, remember_copy, simulated_synthetic_people,
                                         synthetic_people)


def sim_copy(epsilon=1.0, seed=3, population="paper"):
    """A simulated copy (seeded noise) kept in this process's cache, as a stored copy would be."""
    return remember_copy(simulated_synthetic_people(PrivatePairsPlan(population=population, epsilon=epsilon),
                                                    np.random.default_rng(seed)))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0, 0.0, -1.0, 10.5, 1e9, "one", None, True])
def test_pair_epsilon_is_refused_when_not_a_usable_budget(bad):
    with pytest.raises(ValueError, match="epsilon"):
        ElicitationPlan(pair_source="dp_synthetic", pair_epsilon=bad)
    with pytest.raises(ValueError, match="epsilon"):
        PrivatePairsPlan(epsilon=bad)


def test_pair_source_is_checked_and_real_sessions_store_what_they_always_stored():
    with pytest.raises(ValueError, match="Pairs come from"):
        ElicitationPlan(pair_source="synthetic")
    real = SessionConfig()
    assert "pair_source" not in real.session_dict() and "pair_epsilon" not in real.session_dict()
    assert ElicitationPlan().private_pairs_plan() is None
    synth = SessionConfig(pair_source="dp_synthetic", pair_epsilon=2)
    assert synth.pair_epsilon == 2.0 and SessionConfig.from_dict(synth.session_dict()) == synth
    assert ElicitationPlan(pair_epsilon=1).digest() == ElicitationPlan(pair_epsilon=1.0).digest()


def _tight_epsilon(rho: float, delta: float) -> float:
    """(epsilon, delta) of rho-zCDP by the Canonne-Kamath-Steinke bound, minimised on a fine grid."""
    alpha = np.linspace(1.0001, 400.0, 2_000_000)
    eps = alpha * rho + (np.log(1 / delta) + (alpha - 1) * np.log1p(-1 / alpha) - np.log(alpha)) / (alpha - 1)
    return float(eps.min())


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 3.0])
def test_ledger_total_is_the_rho_of_epsilon_and_delta(epsilon):
    copy = synthetic_people(sim_copy(epsilon).plan)
    rho = copy.spent.total("rho")
    assert len(copy.spent.spends) == 1 and copy.spent.spends[0].unit == "rho"
    # Hand computation: the tight conversion of the recorded rho gives back epsilon at delta 1e-6 ...
    assert PAIR_DELTA == 1e-6
    assert _tight_epsilon(rho, PAIR_DELTA) == pytest.approx(epsilon, rel=1e-5)
    # ... and it is more than the simple bound eps = rho + 2 sqrt(rho ln 1/delta) would allow.
    L = math.log(1 / PAIR_DELTA)
    assert rho > (math.sqrt(L + epsilon) - math.sqrt(L)) ** 2
    assert copy.ledger() is copy.spent and copy.headline()["rho"] == rho


def test_a_simulation_reproduces_from_its_rng_and_is_never_found_without_its_id():
    plan = PrivatePairsPlan(epsilon=1.0)
    a = simulated_synthetic_people(plan, np.random.default_rng(11))
    b = simulated_synthetic_people(plan, np.random.default_rng(11))
    pd.testing.assert_frame_equal(a.cards, b.cards)
    pd.testing.assert_frame_equal(a.people, b.people)
    assert a.copy_id == b.copy_id and a.copy_id.startswith("sim") and not a.secure
    c = simulated_synthetic_people(plan, np.random.default_rng(12))
    assert not a.cards.equals(c.cards)
    assert len(a.cards) == len(c.cards) == SYNTHETIC_PEOPLE   # public, not the private row count
    with pytest.raises(ValueError, match="not been made"):
        synthetic_people(plan)
    with pytest.raises(ValueError, match="needs an explicit numpy Generator"):
        simulated_synthetic_people(plan, 11)


def test_bins_are_public_and_values_outside_them_are_clipped():
    frame = pd.DataFrame({"age": [17, 18, 24, 25, 99, 130], "priors_count": [0, 1, 3, 4, 39, 80],
                          "juv_fel_count": 0, "juv_misd_count": 0, "juv_other_count": [0, 1, 2, 3, 4, 50],
                          "sex": "Male", "race": "Caucasian", "c_charge_degree": "F"})
    cats = card_categories(frame)
    assert list(cats["age"].astype(str)) == ["18-20", "18-20", "21-24", "25-29", "65+", "65+"]
    assert list(cats["priors_count"].astype(str)) == ["0", "1", "3-4", "3-4", "20+", "20+"]
    assert list(cats["juv_other_count"].cat.categories) == bin_labels("juv_other_count")
    assert BIN_EDGES["age"][0] == 18
    with pytest.raises(ValueError, match="outside its declared categories"):
        card_categories(frame.assign(race="Martian"))


def test_no_real_row_appears_on_a_synthetic_card():
    made = sim_copy(seed=5)
    config = SessionConfig(pair_source="dp_synthetic", seed=5, pair_copy=made.copy_id)
    cards, people, copy = session_people(config, made)
    assert copy is made
    rows = population_rows(config)
    assert np.array_equal(rows, np.arange(SYNTHETIC_PEOPLE))
    pairs = core_pairs(config)
    assert pairs.max() < SYNTHETIC_PEOPLE                       # card person ids name synthetic people
    assert set(cards.columns) <= set(DISPLAYABLE_FEATURES)       # no identifier, label or score travels
    # Ages are always ranges, so no real record's exact age (and with it its exact row) is shown.
    assert set(cards["age"]) <= set(bin_labels("age"))
    assert all("-" in a or a.endswith("+") for a in cards["age"])
    card = pair_card(cards, int(pairs[0, 0]), int(pairs[0, 1]), DISPLAYABLE_FEATURES)
    assert card.loc[card["Feature"] == "Age", "Person A"].iloc[0].endswith("years old")
    # The design result carries the copy's ledger (what stakeholders see is a release).
    design = run_elicitation(ElicitationPlan(pair_source="dp_synthetic", seed=5, pair_copy=made.copy_id), made)
    assert design.ledger().total("rho") == copy.spent.total("rho")
    assert design.headline()["people pairs are drawn from"] == SYNTHETIC_PEOPLE
    assert design.core_pairs[["i", "j"]].to_numpy().max() < SYNTHETIC_PEOPLE


def test_demo_panel_runs_on_synthetic_people():
    made = sim_copy(seed=2)
    design = run_elicitation(ElicitationPlan(pair_source="dp_synthetic", demo_stakeholders=5, seed=2,
                                             pair_copy=made.copy_id), made)
    assert len(design.constraints) > 0
    assert design.constraints[["i", "j"]].to_numpy().max() < SYNTHETIC_PEOPLE
    assert "synthetic_ledger" in design.tables()


def test_session_people_check_knows_synthetic_sessions():
    from core.fairness.elicitation import outside_session_people
    synth = SessionConfig(pair_source="dp_synthetic")
    pairs = core_pairs(synth)
    assert outside_session_people(pairs, synth).size == 0
    assert list(outside_session_people(np.array([[0, SYNTHETIC_PEOPLE]]), synth)) == [SYNTHETIC_PEOPLE]
    real = SessionConfig()
    assert outside_session_people(core_pairs(real), real).size == 0


def test_a_design_showing_a_copy_takes_it_as_data_and_reads_nothing_else():
    """run(plan, data) depends on its arguments only: the copy is passed in, never looked up (not even from
    this process's cache), and real records take no data."""
    made = sim_copy(seed=3)                       # made and cached in this process
    plan = ElicitationPlan(pair_source="dp_synthetic", seed=3, pair_copy=made.copy_id)
    with pytest.raises(ValueError, match="pass that copy as its data"):
        run_elicitation.uncached(plan)
    assert run_elicitation.uncached(plan, made).copy is made
    with pytest.raises(ValueError, match="takes no data"):
        run_elicitation.uncached(ElicitationPlan(), made)
    from core.fairness import stored_data

    class Store:                                  # whatever holds copies: the caller's choice
        def load_copy(self, copy_id):
            raise AssertionError("a cached copy needs no database")
    assert stored_data(plan, Store()) is made and stored_data(ElicitationPlan(), Store()) is None
