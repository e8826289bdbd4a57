"""BudgetLedger totals on hand-computed sequential + parallel scenarios."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.privacy.accounting import rho_to_epsilon
from core.privacy.ledger import BudgetLedger, Spend


def _pure_scenario() -> BudgetLedger:
    ledger = BudgetLedger()
    ledger.spend("national total", 0.5, "epsilon", measured="population count")
    ledger.spend("county A", 0.3, "epsilon", "parallel", group="counties", measured="counts by race")
    ledger.spend("county B", 0.4, "epsilon", "parallel", group="counties", measured="counts by race")
    ledger.spend("county B age", 0.1, "epsilon", "parallel", group="counties", part="county B",
                 measured="counts by age")
    return ledger


def test_pure_scenario_totals_by_hand():
    ledger = _pure_scenario()
    # sequential 0.5 + counties group max(A: 0.3, B: 0.4 + 0.1) = 1.0
    assert ledger.total("epsilon") == pytest.approx(1.0)
    # rho: 0.5^2/2 = 0.125, plus max(A: 0.045, B: 0.08 + 0.005 = 0.085) = 0.21
    assert ledger.total("rho") == pytest.approx(0.21)
    # a pure ledger keeps its pure total even when a delta is offered
    assert ledger.total("epsilon", delta=1e-6) == pytest.approx(1.0)
    assert ledger.is_pure()


def test_mixed_scenario_needs_delta_and_takes_the_better_valid_bound():
    ledger = _pure_scenario()
    ledger.spend("tract counts", 0.1, "rho", measured="tract totals")
    ledger.spend("tract 1", 0.02, "rho", "parallel", group="tracts")
    ledger.spend("tract 2", 0.05, "rho", "parallel", group="tracts")
    assert ledger.total("rho") == pytest.approx(0.21 + 0.1 + 0.05)
    with pytest.raises(ValueError, match="delta"):
        ledger.total("epsilon")
    split = 1.0 + rho_to_epsilon(0.15, 1e-6)   # pure part summed + zCDP part converted
    pooled = rho_to_epsilon(0.36, 1e-6)        # everything as rho, converted once
    assert ledger.total("epsilon", delta=1e-6) == pytest.approx(min(split, pooled))
    assert not ledger.is_pure()


def test_group_mixing_units_counts_its_largest_rho():
    ledger = BudgetLedger()
    ledger.spend("stratum 1", 1.0, "epsilon", "parallel", group="strata")  # rho 0.5
    ledger.spend("stratum 2", 0.3, "rho", "parallel", group="strata")
    assert ledger.total("rho") == pytest.approx(0.5)
    assert ledger.total("epsilon", delta=1e-5) == pytest.approx(rho_to_epsilon(0.5, 1e-5))


def test_frame_and_statement():
    ledger = _pure_scenario()
    frame = ledger.to_frame()
    assert list(frame["label"]) == ["national total", "county A", "county B", "county B age"]
    assert list(frame["charged"]) == [True, False, True, True]
    assert frame["rho_equivalent"].tolist() == pytest.approx([0.125, 0.045, 0.08, 0.005])
    assert frame.loc[0, "measured"] == "population count"
    text = ledger.statement()
    assert "epsilon = 1" in text and "rho = 0.21" in text
    ledger.spend("extra", 0.04, "rho")
    assert "delta" in ledger.statement()
    assert "epsilon = " in ledger.statement(delta=1e-6)


def test_empty_ledger_and_immutable_records():
    ledger = BudgetLedger()
    assert ledger.total("epsilon") == 0.0 and ledger.total("rho") == 0.0
    assert ledger.to_frame().empty
    assert "No privacy budget" in ledger.statement()
    record = ledger.spend("q", 0.2, "epsilon")
    assert isinstance(record, Spend) and ledger.spends == (record,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.amount = 5.0


@pytest.mark.parametrize("args,kwargs", [
    (("q", 0.0, "epsilon"), {}),
    (("q", -1.0, "rho"), {}),
    (("q", float("nan"), "rho"), {}),
    (("q", "lots", "rho"), {}),
    (("q", 0.1, "delta"), {}),
    (("", 0.1, "epsilon"), {}),
    (("q", 0.1, "epsilon", "parallel"), {}),          # parallel without a group
    (("q", 0.1, "epsilon", "sometimes"), {}),
])
def test_bad_spends_raise_value_error(args, kwargs):
    with pytest.raises(ValueError):
        BudgetLedger().spend(*args, **kwargs)


def test_group_cannot_mix_compositions_and_bad_total_unit():
    ledger = BudgetLedger()
    ledger.spend("a", 0.1, "epsilon", "parallel", group="counties")
    with pytest.raises(ValueError, match="counties"):
        ledger.spend("b", 0.1, "epsilon", "sequential", group="counties")
    with pytest.raises(ValueError):
        ledger.total("delta")

_spend = st.tuples(
    st.floats(0.01, 3.0),                       # amount
    st.sampled_from(["epsilon", "rho"]),
    st.sampled_from([None, "counties", "strata"]),  # None = sequential
    st.sampled_from(["p1", "p2", "p3"]),        # part inside a parallel group
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_spend, min_size=1, max_size=12))
def test_rho_total_is_sequential_sum_plus_group_maxima(spends):
    ledger = BudgetLedger()
    expected_seq, parts = 0.0, {}
    for i, (amount, unit, group, part) in enumerate(spends):
        rho = amount * amount / 2 if unit == "epsilon" else amount
        if group is None:
            ledger.spend(f"s{i}", amount, unit)
            expected_seq += rho
        else:
            ledger.spend(f"s{i}", amount, unit, "parallel", group=group, part=part)
            parts.setdefault(group, {}).setdefault(part, 0.0)
            parts[group][part] += rho
    expected = expected_seq + sum(max(p.values()) for p in parts.values())
    assert ledger.total("rho") == pytest.approx(expected)
    eps = ledger.total("epsilon", delta=1e-6)
    if ledger.is_pure():
        assert eps <= sum(a for a, *_ in spends) + 1e-9  # parallel groups never cost more than their sum
    else:
        assert eps <= rho_to_epsilon(ledger.total("rho"), 1e-6) + 1e-9


def test_summary_reports_both_units():
    ledger = _pure_scenario()
    assert ledger.summary() == {"rho": pytest.approx(0.21), "epsilon": pytest.approx(1.0), "delta": 0.0,
                                "pure": True, "n_spends": 4}
    ledger.spend("extra", 0.1, "rho")
    assert ledger.summary()["epsilon"] is None
    s = ledger.summary(delta=1e-6)
    assert s["epsilon"] == pytest.approx(ledger.total("epsilon", delta=1e-6)) and s["delta"] == 1e-6


def test_statement_follows_spend_order_and_names_disjoint_groups():
    ledger = BudgetLedger()
    ledger.spend("tracts", 0.2, "epsilon", "parallel", group="tract units", part="every unit")
    ledger.spend("counties", 0.3, "epsilon", "parallel", group="county units", part="every unit")
    ledger.spend("block A", 0.1, "epsilon", "parallel", group="blocks", part="A")
    ledger.spend("block B", 0.2, "epsilon", "parallel", group="blocks", part="B")
    text = ledger.statement()
    assert text.index("'tract units'") < text.index("'county units'") < text.index("'blocks'")
    assert "'tract units': one spend shared by disjoint units, counted once" in text
    assert "'blocks': 2 disjoint parts, of which only the largest counts" in text
    assert "add up one after another" in text and "epsilon = 0.7" in text


def test_releases_add_and_keep_each_parallel_group_inside_its_release():
    from core.privacy.project_ledger import LedgerRelease, compose, spends_of, statement

    def release(key, ledger):
        return LedgerRelease("toy", key, "release", "test", "test", key, "", spends_of(ledger))

    first = BudgetLedger()
    first.spend("counts", 0.1, "rho")
    for part in ("a", "b", "c"):
        first.spend(f"model {part}", 0.9, "rho", composition="parallel", group="strata")
    second = BudgetLedger()
    second.spend("model a", 0.5, "rho", composition="parallel", group="strata")
    assert compose([]).rho == 0.0 and "No release" in statement([])
    # by hand: release one costs 0.1 + 0.9 (parts counted once); release two 0.5; releases add
    assert compose([release("k1", first), release("k2", second)]).rho == pytest.approx(1.5)
    assert compose([release("k1", first)]).rho == pytest.approx(1.0)
    one = BudgetLedger()
    one.spend("histogram", 0.5, "epsilon")
    pure = compose([release("x", one), release("y", one)])
    assert pure.pure and pure.epsilon == pytest.approx(1.0)
