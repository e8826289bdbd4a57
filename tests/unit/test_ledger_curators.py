"""Who did it: every reservation, commit and cap decision names the curator who made it, two curators'
releases of one data set still spend from one budget, and a ledger written before curators reads as the
local curator's."""
from __future__ import annotations

import dataclasses
import sqlite3

from core.database import LOCAL_CURATOR
from core.privacy.ledger import Spend
from core.privacy.project_ledger import Cap, LedgerRelease, ProjectLedger, spends_frame

KEY = "dataset:County export"


def _release(curator: str, amount: float, key: str) -> LedgerRelease:
    return LedgerRelease(KEY, key, "release", "Test page", "test action", f"spend {amount}", "d" * 64,
                         (Spend("count", amount, "epsilon"),), curator=curator)


def test_each_release_and_cap_decision_names_its_curator_and_both_spend_one_budget(tmp_path):
    ledger = ProjectLedger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    ledger.set_cap(KEY, Cap(3.0, "epsilon", 1e-6), curator="Ada")
    assert ledger.cap_decided_by(KEY)[0] == "Ada"
    for curator, amount, key in (("Ada", 1.0, "r1"), ("Grace", 1.5, "r2")):
        res = ledger.reserve(_release(curator, amount, key))
        assert [r.curator for _, r in ledger.reservations(KEY)] == [curator]
        ledger.commit(res, _release(curator, amount, key).spends)
    made = ledger.releases(KEY, "release")
    assert [r.curator for r in made] == ["Ada", "Grace"]
    assert ledger.totals(KEY).epsilon == 2.5                      # one budget, whoever spent it
    assert list(spends_frame(made)["curator"]) == ["Ada", "Grace"]
    ledger.set_no_cap(KEY, curator="Grace")
    assert ledger.cap_decided_by(KEY)[0] == "Grace"


def test_a_ledger_written_before_curators_reads_as_the_local_curators(tmp_path):
    path = tmp_path / "old.sqlite"
    ledger = ProjectLedger(f"sqlite:///{path}")
    ledger.set_cap(KEY, Cap(3.0, "epsilon", 1e-6))
    ledger.commit(ledger.reserve(_release("x", 1.0, "old")))
    ledger.db.dispose()
    with sqlite3.connect(path) as conn:                          # the tables as an older version wrote them
        for table in ("ledger_releases", "ledger_caps", "ledger_no_cap"):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN curator")
    again = ProjectLedger(f"sqlite:///{path}")
    [old] = again.releases(KEY, "release")
    assert old.curator == LOCAL_CURATOR and again.cap_decided_by(KEY)[0] == LOCAL_CURATOR
    again.commit(again.reserve(_release("Ada", 0.5, "new")))
    assert [r.curator for r in again.releases(KEY, "release")] == [LOCAL_CURATOR, "Ada"]


def test_a_release_without_a_curator_is_the_local_curators():
    rel = dataclasses.replace(_release("Ada", 1.0, "k"), curator="")
    assert LedgerRelease(**{f.name: getattr(rel, f.name) for f in dataclasses.fields(rel)
                            if f.name != "curator"}).curator == LOCAL_CURATOR
