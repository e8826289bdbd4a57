"""The fit-run log: every learner run on a session's pooled constraints, with the choices that led to it
(spec 4.3, audit log). Runs are idempotent on (constraint-set hash, settings hash)."""
from __future__ import annotations

import json
import os
import uuid
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from core.cache import code_digest, config_digest
from core.fairness.store.schema import MAX_NOTE_LENGTH, fit_runs, now_utc

WITHDRAWN = "(withdrawn stakeholder)"
MAX_CONSTRAINTS = 10**9      # far above any session's pooled pairs; larger counts are not a real run
RUN_FIELDS = ("created_at", "constraint_hash", "aggregation", "learner", "code_version", "n_constraints",
              "unconstrained_error", "frontier", "superseded", "note")


def constraint_set_hash(constraints: pd.DataFrame) -> str:
    """SHA-256 of a constraint frame's pairs and weights, independent of row order and dtypes."""
    cols = [c for c in ("i", "j", "weight", "w_ij", "w_ji") if c in constraints.columns]
    if not {"i", "j"} <= set(cols):
        raise ValueError("The constraint table needs columns i and j.")
    frame = constraints[cols].sort_values(["i", "j"], kind="stable")
    rows = [[int(r[0]), int(r[1]), *(round(float(v), 12) for v in r[2:])]
            for r in frame.itertuples(index=False)]
    return config_digest({"columns": cols, "rows": rows})


def code_version() -> str:
    """The dashboard's version for the audit log: `DASHBOARD_CODE_VERSION`, else the digest of core's
    source (the one the result cache is namespaced by), which needs no git checkout."""
    return os.environ.get("DASHBOARD_CODE_VERSION", "")[:64] or f"core-{code_digest()}"


def frontier_summary(points: pd.DataFrame, n_constraints: int) -> dict:
    """The metrics a fit run logs: constraint count, least-constrained error, each frontier point."""
    need = {"target", "error", "unfairness"}
    if not need <= set(points.columns) or points.empty:
        raise ValueError(f"A frontier needs rows with columns {sorted(need)}.")
    rows = points.sort_values("target")
    frontier = [{"target": float(r["target"]), "error": float(r["error"]), "unfairness": float(r["unfairness"]),
                 "on_hull": bool(r.get("on_hull", False))} for _, r in rows.iterrows()]
    return {"n_constraints": int(n_constraints), "unconstrained_error": frontier[-1]["error"],
            "frontier": frontier}


def finite(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number, got {value!r}.")
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what} must be a number, got {value!r:.40}.") from None
    if not np.isfinite(f):
        raise ValueError(f"{what} must be finite, got {value!r}.")
    return f


def whole(value: Any, what: str) -> int:
    """A whole number read from a file or form (bools and fractions refused)."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a whole number, got {value!r}.")
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what} must be a whole number, got {value!r:.40}.") from None
    if not np.isfinite(f) or f != int(f):
        raise ValueError(f"{what} must be a whole number, got {value!r:.40}.")
    return int(f)


def flag(value: Any, what: str, default: bool = False) -> bool:
    """A yes/no read from a file: JSON true or false (missing: ``default``); text such as "false" is
    refused rather than read as yes."""
    if value is None:
        return default
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{what} must be true or false, got {value!r:.40}.")


def check_run(constraint_hash: Any, aggregation: Any, learner: Any, summary: Any, version: Any) -> dict:
    """Validate a fit run's fields; returns the columns to store (plain JSON-able data)."""
    if not isinstance(constraint_hash, str) or not 8 <= len(constraint_hash) <= 64:
        raise ValueError("A fit run needs the constraint-set hash (8 to 64 characters).")
    for part, value in (("aggregation", aggregation), ("learner", learner), ("summary", summary)):
        if not isinstance(value, dict):
            raise ValueError(f"A fit run's {part} must be a dictionary of settings.")
    try:
        aggregation = json.loads(json.dumps(aggregation, allow_nan=False))
        learner = json.loads(json.dumps(learner, allow_nan=False))
    except (TypeError, ValueError):
        raise ValueError("A fit run's settings must be plain JSON values (finite numbers, text, lists).") from None
    frontier = summary.get("frontier")
    if not isinstance(frontier, list) or not all(isinstance(p, dict) for p in frontier):
        raise ValueError("A fit run's frontier must be a list of points.")
    points = [{"target": finite(p.get("target"), "target"), "error": finite(p.get("error"), "error"),
               "unfairness": finite(p.get("unfairness"), "unfairness"),
               "on_hull": flag(p.get("on_hull"), "A frontier point's on_hull")}
              for p in frontier]
    n = whole(summary.get("n_constraints"), "n_constraints")
    if not 0 <= n <= MAX_CONSTRAINTS:
        raise ValueError(f"n_constraints must be a whole number from 0 to {MAX_CONSTRAINTS:,}; got {n}.")
    error = summary.get("unconstrained_error")
    if isinstance(error, float) and not np.isfinite(error):
        error = None
    if version is not None and (not isinstance(version, str) or len(version) > 64):
        raise ValueError("The code version must be text of at most 64 characters.")
    return {"constraint_hash": constraint_hash, "aggregation": aggregation, "learner": learner,
            "code_version": version, "n_constraints": n,
            "unconstrained_error": None if error is None else finite(error, "unconstrained_error"),
            "frontier": points}


def public_run(row) -> dict:
    """A stored run as exported: everything but the internal ids."""
    return {k: (bool(row[k]) if k == "superseded" else row[k]) for k in RUN_FIELDS}


def runs_of(conn: Connection, session_id: str) -> list:
    return conn.execute(select(fit_runs).where(fit_runs.c.session_id == session_id)
                        .order_by(fit_runs.c.created_at, fit_runs.c.run_id)).mappings().all()


class FitRunLog:
    """Store methods for the fit-run log (mixed into ElicitationStore)."""

    def record_fit_run(self, session_id: str, facilitator_key: str, *, constraint_hash: str,
                       aggregation: dict, learner: dict, summary: dict,
                       code_version: str | None = None) -> tuple[str, bool]:
        """Log one learner run on the session's pooled constraints (facilitator only).

        Idempotent: the same constraint-set hash with the same aggregation and learner settings
        maps to one row. Returns (run id, whether a row was written now).
        """
        values = check_run(constraint_hash, aggregation, learner, summary, code_version)
        settings_hash = config_digest({"aggregation": values["aggregation"], "learner": values["learner"]})
        where = (fit_runs.c.session_id == session_id, fit_runs.c.constraint_hash == values["constraint_hash"],
                 fit_runs.c.settings_hash == settings_hash)
        try:
            with self.write_tx() as conn:
                self.session_row(conn, session_id, facilitator_key)
                found = conn.execute(select(fit_runs.c.run_id).where(*where)).scalar()
                if found is not None:
                    return found, False
                run_id = uuid.uuid4().hex
                conn.execute(insert(fit_runs).values(run_id=run_id, session_id=session_id, created_at=now_utc(),
                                                     settings_hash=settings_hash, superseded=False,
                                                     note=None, **values))
                return run_id, True
        except IntegrityError:  # another tab or process logged the same run first
            with self.read_tx() as conn:
                found = conn.execute(select(fit_runs.c.run_id).where(*where)).scalar()
            if found is None:
                raise
            return found, False

    def fit_runs(self, session_id: str, facilitator_key: str) -> list[dict]:
        """The session's logged learner runs, oldest first, as plain data (facilitator only)."""
        with self.read_tx() as conn:
            self.session_row(conn, session_id, facilitator_key)
            return [public_run(r) | {"run_id": r["run_id"]} for r in runs_of(conn, session_id)]

    def supersede_runs_of(self, conn: Connection, session_id: str, pseudonym: str) -> None:
        """Withdrawal: runs that pooled this stakeholder are superseded and forget their name."""
        note = (f"Superseded on {now_utc()[:10]}: a pooled stakeholder was withdrawn; "
                "refit on the remaining answers.")
        for run in runs_of(conn, session_id):
            pooled = list(run["aggregation"].get("stakeholders") or [])
            if pseudonym not in pooled:
                continue
            aggregation = {**run["aggregation"],
                           "stakeholders": [WITHDRAWN if p == pseudonym else p for p in pooled]}
            update = {"aggregation": aggregation}
            if not run["superseded"]:
                update.update(superseded=True, note=note[:MAX_NOTE_LENGTH])
            conn.execute(fit_runs.update().where(fit_runs.c.run_id == run["run_id"]).values(**update))
