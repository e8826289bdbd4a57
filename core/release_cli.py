"""``python -m core release FILE [--data FILE] [--cap EPSILON | --no-cap] [--out DIR]``: a real release, headless.

FILE says what to release; the kind follows from it:

* a report a page exported, or a plan JSON, whose plan is one of
  ``BudgetPlan`` (census noisy counts of the report's allocation), ``SynthesisPlan`` with its ``release``
  settings (a secure synthetic copy), ``MeanReleasePlan`` (a stratified mean), ``PublishPlan`` or an audit's
  ``AuditPlan`` with ``--choice KEY`` (one audited algorithm's output), ``ElicitationPlan`` with synthetic
  cards (the elicitation's synthetic copy, stored in the project database);
* a release request, for the two kinds the Data step makes without a report:
  ``{"release": "private estimate", "data_set": NAME, "column": COL, "what": "bounds" | "categories",
  "epsilon": 1.0, "floor": null, "ceiling": null}`` (private bounds or categories of a declared
  column) with ``--data`` the declared file, or ``{"release": "folder synthetic copy", "name": NAME,
  "out_folder": DIR, "method": "mst", "epsilon": 1.0, "delta": 1e-6, "out_parts": 4, "aim_rounds": 0}``
  (a synthetic copy of a declared folder set, read from the folder it was declared with).

Data: an upload must be a data set declared in the project database (``python -m core data ...`` or the
Data step), passed again with ``--data`` (its fingerprint is checked against the plan's); bundled data (a
census geography, the bundled microdata) needs no file. The release goes through ``core.releases``: reserved
against the data set's cap (``--cap`` decides a first cap, ``--no-cap`` records the choice of none), computed
with OpenDP's secure sampler, committed with its detailed spends, then published (``--out``: its tables as
CSV). What is printed (the spends, the ledger entry) is what the ledger holds, never a count of the data.
Exit codes: 0 released; 1 nothing was released (refused, failed, cancelled); 2 the input could not be read.
"""
from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from core.census import BudgetPlan
from core.coherence import AuditPlan, PublishPlan
from core.contracts import DataRef, Plan, plan_from_dict
from core.fairness import ElicitationPlan
from core.privacy.project_ledger import Cap, CapUndecided, ProjectLedger, data_key
from core.synthesis import MeanReleasePlan, SynthesisPlan
from core.releases import (COMMITTED, Outcome, Release, audited_output_release, census_counts_release,
                           folder_copy_release, pairs_copy_release, private_estimate_release, run_release,
                           stratified_mean_release, synthetic_data_release)
from core.report import check_upload, data_ref_of, guarded_csv, load_plan
from core.uploads import parse_json_text, read_bytes, read_text
from core.census.allocation import Allocation
from core.contracts import bytes_fingerprint
from core.fairness.private_pairs import new_copy_id
from core.fairness.store import get_store
from core.intake.read import read_table_bytes
from core.intake.store import DataSetStore
from core.report import run_plan
from core.synthesis.folder_release import FolderReleasePlan

__all__ = ["PAGE", "add_release_parser", "release_from", "run_release_command"]

PAGE = "command line"
ESTIMATE_REQUEST, FOLDER_REQUEST = "private estimate", "folder synthetic copy"


def add_release_parser(sub: argparse._SubParsersAction) -> None:
    """The ``release`` command on the main parser's sub-commands."""
    cmd = sub.add_parser("release", help="make a real release of a report's or plan's data set, headless",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmd.add_argument("file", type=Path, help="a page's report, a plan JSON, or a private-estimate request")
    cmd.add_argument("--data", type=Path, action="append", default=[],
                     help="the declared data file the plan ran on (uploads only)")
    cmd.add_argument("--choice", default="", help="an audit report: the key of the algorithm to release")
    caps = cmd.add_mutually_exclusive_group()
    caps.add_argument("--cap", type=float, default=None,
                      help="decide the data set's first cap (epsilon, at delta --cap-delta) before releasing")
    caps.add_argument("--no-cap", action="store_true", help="record that the data set has no cap")
    cmd.add_argument("--cap-delta", type=float, default=1e-6, help="the delta a cap set with --cap holds at")
    cmd.add_argument("--out", type=Path, default=None, help="folder for the released tables (CSV)")


def _declared(ref: DataRef | None) -> None:
    """Refuse an upload that is not a data set declared in the project database."""
    if ref is None or not ref.is_upload:
        return
    schema = getattr(ref, "schema", None)
    if schema is None or DataSetStore().get(schema.name) is None:
        raise ValueError("Real releases are made on declared data sets only: declare the file first (the Data "
                         "step, or `python -m core data profile` then the page), then export the plan again.")


def _files(args) -> tuple[bytes, ...]:
    return tuple(read_bytes(p) for p in args.data)


def _estimate(body: dict, args) -> Release:
    """The private bounds/categories estimate of one column of a declared data set."""
    name = str(body.get("data_set") or "")
    schema = DataSetStore().get(name) if name else None
    if schema is None:
        raise ValueError(f"No data set named {name!r} is declared: give 'data_set', the name it was declared "
                         "under (the Data step or `python -m core data`).")
    if len(args.data) != 1:
        raise ValueError("A private estimate reads the declared file: pass it once with --data.")
    raw = read_bytes(args.data[0])
    frame = read_table_bytes(raw, args.data[0].name)
    ref = DataRef(DataRef.UPLOAD, bytes_fingerprint(raw), schema=schema)
    try:
        epsilon = float(body.get("epsilon", 1.0))
    except (TypeError, ValueError):
        raise ValueError("'epsilon' must be a number.") from None
    if not 0 < epsilon <= 10:
        raise ValueError(f"'epsilon' must lie in (0, 10]; got {epsilon!r}.")
    floor, ceiling = (_optional_number(body, name) for name in ("floor", "ceiling"))
    return private_estimate_release(ref, frame, str(body.get("column") or ""), str(body.get("what") or ""),
                                    epsilon, page=PAGE, floor=floor, ceiling=ceiling)


def _optional_number(body: dict, name: str) -> float | None:
    """A public floor or ceiling the curator declared in the request, or None."""
    value = body.get(name)
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name!r} must be a number or null; got {value!r}.") from None


def _census(plan, source: dict | None) -> Release:
    text = (source or {}).get("allocation")
    allocation = Allocation.from_json(text) if text else run_plan(plan.setup()).allocation
    label = f"noisy counts, {allocation.mechanism}"
    return census_counts_release(plan, allocation, page=PAGE, label=label)


def _microdata_label(plan) -> str:
    """The name a bundled data set's releases are listed under (a declared one is listed by its own name)."""
    ref = data_ref_of(plan)
    return "" if ref is None else data_key(ref)


def _audited(plan, data, choice: str) -> Release:
    if not isinstance(plan, PublishPlan):
        keys = [c.key for c in plan.releases]
        picked = next((c for c in plan.releases if c.key == choice), None)
        if picked is None:
            raise ValueError(f"Name the audited algorithm to release with --choice, one of {keys}.")
        plan = PublishPlan.from_audit(plan, picked)
    return audited_output_release(plan, data, page=PAGE, label=f"release of {plan.release.key}",
                                  data_name=_microdata_label(plan))


def release_from(body: dict, args) -> Release:
    """The release FILE asks for (see the module docstring); ``ValueError`` saying what to change."""
    request = body.get("release") if isinstance(body, dict) else None       # a plan's "release" is its sub-plan
    request = request if isinstance(request, str) else None
    if request == ESTIMATE_REQUEST:
        return _estimate(body, args)
    if request == FOLDER_REQUEST:
        return _folder(body)
    if request is not None:
        raise ValueError(f"A release request is {ESTIMATE_REQUEST!r} or {FOLDER_REQUEST!r}, not {request!r}.")
    source = body if isinstance(body, dict) and "schema" in body else None
    plan = load_plan(body) if source is not None else plan_from_dict(body)
    if not isinstance(plan, Plan):
        raise ValueError("FILE holds no plan: give a page's report, a plan JSON, or a release request.")
    _declared(data_ref_of(plan))
    if isinstance(plan, BudgetPlan):
        return _census(plan, source)
    data = check_upload(plan, _files(args))
    if isinstance(plan, SynthesisPlan):
        if plan.release is None:
            raise ValueError("The synthesis plan has no release settings: set the release's epsilon and method "
                             "(its 'release' part) and export it again.")
        label = f"secure {plan.release.method}, epsilon {plan.release.epsilon:g}"
        return synthetic_data_release(plan, data, page=PAGE, label=label, data_name=_microdata_label(plan))
    if isinstance(plan, MeanReleasePlan):
        label = f"stratified mean of {plan.column}, epsilon {plan.epsilon:g}"
        return stratified_mean_release(plan, data, page=PAGE, label=label, data_name=_microdata_label(plan))
    if isinstance(plan, (PublishPlan, AuditPlan)):
        return _audited(plan, data, args.choice)
    if isinstance(plan, ElicitationPlan):
        return _pairs(plan)
    raise ValueError(f"A {type(plan).__name__} makes no real release. Give a budget, synthesis, mean, audit or elicitation "
                     "plan, or a release request (see `python -m core release --help`).")


def _pairs(plan) -> Release:
    sub = plan.private_pairs_plan()
    if sub is None:
        raise ValueError("This elicitation shows real records: choose synthetic cards to release a copy.")
    return pairs_copy_release(sub.replace(copy_id=""), new_copy_id(), page=PAGE, store=get_store())


def _folder(body: dict) -> Release:
    fields = ("name", "method", "epsilon", "delta", "out_folder", "out_parts", "aim_rounds")
    unknown = sorted(set(body) - {"release", *fields})
    if unknown:
        raise ValueError(f"A folder release request takes {list(fields)}; remove {unknown}.")
    plan = FolderReleasePlan(**{k: body[k] for k in fields if k in body})
    store = DataSetStore()
    schema, folder = store.get(plan.name), store.folder(plan.name)
    if schema is None or folder is None:
        raise ValueError(f"No folder set named {plan.name!r} is declared; run `python -m core data declare-folder`.")
    return folder_copy_release(plan, schema, folder, page=PAGE, nonce=secrets.token_hex(6))


def _decide_cap(ledger: ProjectLedger, key: str, args) -> None:
    """``--cap`` / ``--no-cap``: the data set's first cap decision (a decided cap is changed on the Privacy
    ledger page, not here)."""
    if args.cap is None and not args.no_cap:
        return
    if ledger.cap_decision(key) is not None:
        raise ValueError(f"{key} already has a cap decision; change it on the Privacy ledger page, then release "
                         "without --cap / --no-cap.")
    if args.no_cap:
        ledger.set_no_cap(key)
    else:
        ledger.set_cap(key, Cap(float(args.cap), "epsilon", float(args.cap_delta)))


def _tables(result) -> dict:
    """The published result's tables, for ``--out``."""
    if isinstance(result, tuple):                     # the estimate: (found, spent)
        import pandas as pd
        found = result[0]
        return {"estimate": pd.DataFrame({"value": list(found)})}
    tables = getattr(result, "tables", None)
    if callable(tables):
        return tables()
    for name in ("counts", "data"):
        frame = getattr(result, name, None)
        if frame is not None and hasattr(frame, "to_csv"):
            return {name: frame}
    return {}


def _say(outcome: Outcome) -> None:
    """The release as the ledger holds it: its entry and every spend (and an estimate's public values)."""
    entry = outcome.committed
    res = outcome.reservation
    print(f"Released: {entry.label} from {entry.data_label or entry.data_key}.")
    if isinstance(outcome.result, tuple):
        print(f"Estimate (public from now on): {list(outcome.result[0])}")
    print(f"Ledger entry {res.id} ({entry.release_key}) of {entry.data_key}; spends:")
    for s in entry.spends:
        where = f", {s.composition}" + (f" group {s.group}" if s.group else "")
        print(f"  {s.label}: {s.amount:.6g} {s.unit}" + (f" (delta {s.delta:g})" if s.delta else "") + where)


def run_release_command(args) -> int:
    """Run ``python -m core release``; ValueError/OSError propagate to the caller (exit 2)."""
    body = parse_json_text(read_text(args.file))
    release = release_from(body, args)
    ledger = ProjectLedger()
    _decide_cap(ledger, release.data_key, args)
    outcome = run_release(release, ledger, progress=_progress)
    if outcome.state != COMMITTED:
        why = str(outcome.error).rstrip(".") or type(outcome.error).__name__
        hint = " Or decide it here with --cap EPSILON or --no-cap." if isinstance(outcome.error, CapUndecided) else ""
        print(f"Nothing was released ({outcome.state}): {why}.{hint} {outcome.left}", file=sys.stderr)
        return 1
    _say(outcome)
    if outcome.notice:
        print(outcome.notice, file=sys.stderr)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, frame in _tables(outcome.result).items():
            (args.out / f"{name}.csv").write_text(guarded_csv(frame))
        print(f"Published tables written to {args.out}.")
    return 0


def _progress(done: int, total: int, message: str = "") -> None:
    print(f"\r{message}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)
