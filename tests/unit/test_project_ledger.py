"""The project ledger: composition against hand-computed totals, caps, simulations apart, persistence."""
from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import text

from core.contracts import DataRef
from core.privacy.accounting import rho_to_epsilon, rho_to_epsilon_simple
from core.privacy.ledger import BudgetLedger, Spend
from core.privacy.project_ledger import (Cap, LedgerRelease, ProjectLedger, check_cap, compose,
                                         cumulative_frame, data_key, release_key, spends_of)
from tests.postgres import schema_url


def rel(*spends, kind="release", key=None, data="cps"):
    return LedgerRelease(data, key or uuid.uuid4().hex, kind, "Test page", "test action", "a release", "d" * 64,
                         tuple(spends))


def eps(amount, **kw):
    return Spend(kw.pop("label", "count"), amount, "epsilon", **kw)


def rho(amount, **kw):
    return Spend(kw.pop("label", "marginal"), amount, "rho", **kw)


def test_pure_releases_add_up():
    t = compose([rel(eps(0.5)), rel(eps(0.25), eps(0.125))])
    assert t.epsilon == pytest.approx(0.875)
    assert t.delta == 0.0 and t.pure
    assert t.rho == pytest.approx(0.5 ** 2 / 2 + 0.25 ** 2 / 2 + 0.125 ** 2 / 2)


def test_parallel_counts_the_largest_part_and_only_inside_its_release():
    first = rel(eps(1.0, composition="parallel", group="strata", part="a"),
                eps(0.3, composition="parallel", group="strata", part="b"),
                eps(0.3, composition="parallel", group="strata", part="b"),
                eps(0.5))
    # 1.0 (the larger of part a = 1.0 and part b = 0.6) + 0.5 sequential
    assert compose([first]).epsilon == pytest.approx(1.5)
    # a later release over the same strata composes sequentially with the first, never in parallel
    second = rel(eps(0.2, composition="parallel", group="strata", part="b"))
    assert compose([first, second]).epsilon == pytest.approx(1.7)


def test_zcdp_adds_in_rho_and_converts_tightly():
    t = compose([rel(rho(0.1)), rel(rho(0.2)), rel(eps(1.0))], delta=1e-6)
    assert t.rho == pytest.approx(0.3 + 0.5)          # pure epsilon 1 counts as rho 1/2
    split = 1.0 + rho_to_epsilon(0.3, 1e-6)
    pooled = rho_to_epsilon(0.8, 1e-6)
    assert t.epsilon == pytest.approx(min(split, pooled))
    assert t.epsilon < 0.3 + 2 * (0.3 * 13.8155) ** 0.5 + 1.0   # below the simple bound on the split
    assert rho_to_epsilon(0.3, 1e-6) <= rho_to_epsilon_simple(0.3, 1e-6)
    assert t.delta == 1e-6 and not t.pure


def test_approximate_spends_add_epsilons_and_deltas():
    t = compose([rel(eps(0.5, delta=1e-7)), rel(eps(0.5, delta=1e-7), eps(0.25))])
    assert t.epsilon == pytest.approx(1.25)
    assert t.delta == pytest.approx(2e-7)
    assert t.rho is None


def test_simulations_never_count():
    t = compose([rel(eps(0.5)), rel(eps(10.0), kind="simulation")])
    assert t.epsilon == pytest.approx(0.5) and t.n_releases == 1


def test_cap_check_warns_before_exceeding():
    made = [rel(eps(0.75))]
    cap = Cap(1.0, "epsilon", 1e-6)
    assert check_cap(made, cap).within
    over = check_cap([*made, rel(eps(0.5))], cap)
    assert not over.within and over.spent == pytest.approx(1.25)
    assert not check_cap([rel(eps(0.1, delta=1e-7))], Cap(1.0, "rho")).within   # no rho for (eps, delta)
    with pytest.raises(ValueError):
        Cap(0.0)


def test_spends_of_a_page_ledger_keep_groups_and_level_delta():
    book = BudgetLedger()
    book.spend("county counts", 0.5, "epsilon", "parallel", "counties", "noisy counts", "every unit")
    book.level_delta = 1e-8
    (s,) = spends_of(book)
    assert (s.group, s.part, s.delta, s.composition) == ("counties", "every unit", 1e-8, "parallel")


def test_keys():
    assert data_key(DataRef("cps")) == "cps"
    assert data_key(DataRef("upload", "a" * 64)) == "upload:" + "a" * 64
    assert release_key("noisy counts", "abc") == "noisy counts:abc"
    assert release_key("noisy counts", "abc", "n1") == "noisy counts:abc:n1"


def _restart_keeps_the_ledger(url: str) -> None:
    key = f"test-{uuid.uuid4().hex[:12]}"
    ledger = ProjectLedger(url)
    first = rel(eps(0.5, composition="parallel", group="counties", part="every unit", measured="counts"),
                key="counts:p1", data=key)
    assert ledger.record(first)
    assert not ledger.record(first)                  # a rerun of the page records nothing new
    assert ledger.record(rel(rho(0.02), data=key, key="synth:p2"))
    assert ledger.record(rel(eps(3.0), data=key, key="preview:p3", kind="simulation"))
    ledger.set_cap(key, Cap(2.0, "epsilon", 1e-6))
    ledger.engine.dispose()

    later = ProjectLedger(url)                     # a restart: a new engine on the same URL
    assert [r.release_key for r in later.releases(key)] == ["counts:p1", "synth:p2", "preview:p3"]
    assert later.releases(key, "simulation")[0].spends[0].amount == 3.0
    got = later.releases(key, "release")[0].spends[0]
    assert (got.group, got.part, got.measured) == ("counties", "every unit", "counts")
    t = later.totals(key)
    assert t.rho == pytest.approx(0.125 + 0.02)
    assert t.epsilon == pytest.approx(min(0.5 + rho_to_epsilon(0.02, 1e-6), rho_to_epsilon(0.145, 1e-6)))
    assert later.cap(key) == Cap(2.0, "epsilon", 1e-6)
    assert not later.projected(rel(eps(1.9), data=key)).within
    assert later.projected(rel(eps(0.1), data=key)).within
    exported = later.export(key)
    json.dumps(exported, allow_nan=False)
    assert len(exported["releases"]) == 2 and len(exported["simulations"]) == 1
    assert len(cumulative_frame(later.releases(key))) == 2
    assert key in set(later.data_sets()["data_key"])
    later.engine.dispose()


def test_a_restart_keeps_the_ledger_sqlite(tmp_path):
    _restart_keeps_the_ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")


def test_a_restart_keeps_the_ledger_postgres():
    with schema_url() as url:          # skips without DASHBOARD_TEST_PG_URL
        _restart_keeps_the_ledger(url)


def test_the_synthesis_release_book_is_folded_in(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    from core.database import make_engine
    engine = make_engine(url)
    spends = json.dumps([{"label": "fit", "amount": 0.1, "unit": "rho", "composition": "sequential",
                          "group": None, "part": None, "measured": "every row"}])
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE synthesis_releases (id INTEGER PRIMARY KEY, data_key TEXT, release_key TEXT, "
                          "label TEXT, spends TEXT, created_utc TEXT)"))
        conn.execute(text("INSERT INTO synthesis_releases VALUES (1, 'cps', 'k1', 'secure pooled, epsilon 1', :s, "
                          "'2026-01-01T00:00:00+00:00'), (2, 'cps', 'k2', 'seeded pooled, epsilon 1', :s, "
                          "'2026-01-01T00:00:01+00:00')"), {"s": spends})
    engine.dispose()
    ledger = ProjectLedger(url)
    assert [r.kind for r in ledger.releases("cps")] == ["release", "simulation"]
    assert ledger.totals("cps").rho == pytest.approx(0.1)
    from sqlalchemy import inspect
    assert "synthesis_releases" not in inspect(ledger.engine).get_table_names()


def test_statement_names_the_count_and_the_total():
    from core.privacy.project_ledger import statement
    assert statement([], name="CPS") == "No release has been made from CPS yet."
    text = statement([rel(eps(0.5)), rel(eps(0.25)), rel(eps(9.0), kind="simulation")], name="CPS")
    assert text.startswith("2 releases from CPS so far") and "epsilon = 0.75" in text


def test_data_sets_of_one_kind_leave_out_data_sets_with_only_simulations(tmp_path):
    ledger = ProjectLedger(f"sqlite:///{tmp_path / 'kinds.db'}")
    ledger.record(rel(eps(1.0), data="released"))
    ledger.record(rel(eps(2.0), data="previewed", kind="simulation"))
    ledger.set_cap("capped", Cap(3.0, "epsilon"))
    assert set(ledger.data_sets()["data_key"]) == {"released", "previewed", "capped"}
    assert set(ledger.data_sets(kind="release")["data_key"]) == {"released", "capped"}
