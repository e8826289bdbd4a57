"""Session export (JSON, guarded CSV) and import.

An import is validated completely before anything is written, then stored in one transaction,
so a bad file leaves nothing behind. Pairs must name two different rows of the session's data,
both people of the session's population (an export without a population is an older session's,
drawn from every row: "full"), or for a synthetic-copy session two of its synthetic people; names
and reasons pass the same checks as typed ones, and every value fits its column.

A synthetic-copy session's export carries its copy (the released people and their metadata, never
the data they were made from). Importing it stores the copy when its id is new and records the
copy's release in the project ledger of the importing database under the same release key, so the
ledger there is complete; importing the same copy again records nothing more. An export that carries
other people under a copy id this database or process already holds is refused: a copy never changes.
"""
from __future__ import annotations

import io
import json
import secrets
import uuid
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import insert, select

from core.cache import config_digest
from core.datasets import COMPAS_POPULATIONS
from core.fairness.elicitation import RESPONSE_MODES, RETRACT, SKIP, ElicitationPlan, outside_session_people
from core.fairness.private_pairs import (SYNTHETIC_PEOPLE, copy_clash, copy_from_json, copy_release, copy_to_json,
                                         refuse_clash, remember_copy, same_copy)
from core.fairness.store.checks import check_pseudonym, check_reason, check_session_name, digest
from core.fairness.store.runs import check_run, flag, public_run, runs_of, whole
from core.fairness.store.schema import (MAX_NOTE_LENGTH, SCHEMA_VERSION, assignments, fit_runs, judgments,
                                        now_utc, stakeholders)
from core.fairness.store.sessions import MAX_LATENCY_MS, COMPAS_ROWS, CreatedSession, optional, session_size
from core.report import guarded_csv, unguard_cell
from core.uploads import MAX_COLUMNS, parse_json_text, read_upload

EXPORT_FORMAT = "fairness-elicitation-session"
MAX_SESSION_BYTES = 50_000_000
FREE_TEXT_COLUMNS = ("reason", "pseudonym")
MAX_POSITION = 100_000
MAX_REVISION = 1_000_000
EVENT_COLUMNS = ["stakeholder", "event_id", "position", "revision", "response", "confidence", "latency_ms",
                 "created_at", "reason"]


class SessionExchange:
    """Store methods for export and import (mixed into ElicitationStore)."""

    def export_session(self, session_id: str, facilitator_key: str) -> dict:
        """The whole session as plain data: settings, pseudonyms, assignments and all events.

        Keys and tokens are left out; an import gets fresh ones.
        """
        with self.read_tx() as conn:
            s = self.session_row(conn, session_id, facilitator_key)
            people = conn.execute(select(stakeholders.c.stakeholder_id, stakeholders.c.pseudonym,
                                         stakeholders.c.simulated, stakeholders.c.joined_at)
                                  .where(stakeholders.c.session_id == session_id)).mappings().all()
            plan = conn.execute(select(assignments.c.stakeholder_id, assignments.c.position, assignments.c.a,
                                       assignments.c.b, assignments.c.kind, assignments.c.repeat_of)
                                .where(assignments.c.session_id == session_id)
                                .order_by(assignments.c.stakeholder_id, assignments.c.position)).mappings().all()
            events = conn.execute(select(judgments.c.seq, judgments.c.event_id, judgments.c.stakeholder_id,
                                         judgments.c.position, judgments.c.revision, judgments.c.response,
                                         judgments.c.confidence, judgments.c.latency_ms, judgments.c.created_at,
                                         judgments.c.reason)
                                  .where(judgments.c.session_id == session_id)
                                  .order_by(judgments.c.seq)).mappings().all()
            runs = [public_run(r) for r in runs_of(conn, session_id)]
        config = ElicitationPlan.from_dict(dict(s["config"]))
        copy = copy_to_json(self.load_copy(config.pair_copy)) if config.pair_copy else None
        alias = {p["stakeholder_id"]: f"s{n + 1:03d}" for n, p in enumerate(people)}
        return {
            "format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION,
            "session": {"name": s["name"], "created_at": s["created_at"], "status": s["status"],
                        "simulated": bool(s["simulated"]), "config": dict(s["config"]),
                        "core_pairs": [list(map(int, p)) for p in s["core_pairs"]],
                        "n_individuals": int(s["n_individuals"])},
            "stakeholders": [{"id": alias[p["stakeholder_id"]], "pseudonym": p["pseudonym"],
                              "simulated": bool(p["simulated"]), "joined_at": p["joined_at"]} for p in people],
            "assignments": [{"stakeholder": alias[r["stakeholder_id"]], "position": r["position"], "a": r["a"],
                             "b": r["b"], "kind": r["kind"], "repeat_of": r["repeat_of"]} for r in plan],
            "events": [{"stakeholder": alias[e["stakeholder_id"]], "event_id": e["event_id"],
                        "position": e["position"], "revision": e["revision"], "response": e["response"],
                        "confidence": e["confidence"], "latency_ms": e["latency_ms"],
                        "created_at": e["created_at"], "reason": e["reason"]} for e in events],
            "fit_runs": runs,
            **({"synthetic_copy": copy} if copy is not None else {}),
        }

    def export_json(self, session_id: str, facilitator_key: str) -> str:
        return json.dumps(self.export_session(session_id, facilitator_key), indent=1, sort_keys=True)

    def export_csv(self, session_id: str, facilitator_key: str) -> str:
        """One CSV row per event with its pair; the settings ride along in a leading comment line.

        Written by core.report.guarded_csv (text a spreadsheet would run as a formula gets an
        apostrophe, removed again on import). Fit runs are left out (they are in the JSON export).
        """
        data = self.export_session(session_id, facilitator_key)
        events = pd.DataFrame(data["events"], columns=EVENT_COLUMNS)
        plan = pd.DataFrame(data["assignments"], columns=["stakeholder", "position", "a", "b", "kind", "repeat_of"])
        people = pd.DataFrame(data["stakeholders"], columns=["id", "pseudonym", "simulated", "joined_at"])
        # Assignments without events still need a row so the import can rebuild every card.
        rows = plan.merge(events, on=["stakeholder", "position"], how="left")
        rows = rows.merge(people.rename(columns={"id": "stakeholder"}), on="stakeholder", how="left")
        header = json.dumps({"format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION,
                             "session": data["session"],
                             **({"synthetic_copy": data["synthetic_copy"]} if "synthetic_copy" in data else {})},
                            sort_keys=True)
        return "# " + header + "\n" + guarded_csv(rows)

    def import_session(self, payload: str | bytes | dict, *, name: str | None = None,
                       ledger=None) -> CreatedSession:
        """Load an exported session (JSON text/dict or CSV text) as a new session with new keys.

        Everything is checked first (parse_export); the session and all its rows are then
        written in one transaction. A synthetic-copy session's copy is recorded first in the project
        ledger (``ledger``, default: the project ledger of this store's database; once per copy id)
        and stored with the session when its id is new.
        """
        data = parse_export(payload)
        s = data["session"]
        config = ElicitationPlan.from_dict(s["config"])
        title = check_session_name(name if name is not None else f"{s['name'][:100]} (imported)")
        ids = {p["id"]: uuid.uuid4().hex for p in data["stakeholders"]}
        copy = data.get("synthetic_copy")
        if config.synthetic and copy is None and not self.has_copy(config.pair_copy):
            raise ValueError(f"The export does not carry synthetic copy {config.pair_copy} and this database "
                             "does not hold it; export the session again from the dashboard that made it.")
        if copy is not None:
            # A copy never changes once stored: other people under a known id are refused before anything
            # is recorded (insert_copy checks again inside the transaction).
            if self.has_copy(copy.copy_id) and not same_copy(self.load_copy(copy.copy_id), copy):
                raise copy_clash(copy.copy_id)
            refuse_clash(copy)
            # Accounting first: a recorded release the import then fails to store over-reports, never under.
            if ledger is None:
                from core.privacy.project_ledger import ProjectLedger
                ledger = ProjectLedger(self.url)
            ledger.record(copy_release(copy.plan))
        with self.write_tx() as conn:
            if copy is not None:
                self.insert_copy(conn, copy)
            created = self.insert_session(conn, config, title, simulated=bool(s["simulated"]),
                                          n_individuals=int(s["n_individuals"]), core=s["core_pairs"],
                                          status=s["status"])
            sid = created.session_id
            if ids:
                conn.execute(insert(stakeholders), [
                    {"stakeholder_id": ids[p["id"]], "session_id": sid, "pseudonym": p["pseudonym"],
                     "token_hash": digest(secrets.token_urlsafe(18)), "simulated": p["simulated"],
                     "joined_at": p["joined_at"]} for p in data["stakeholders"]])
            if data["assignments"]:
                conn.execute(insert(assignments), [
                    {"session_id": sid, "stakeholder_id": ids[r["stakeholder"]], "position": r["position"],
                     "a": r["a"], "b": r["b"], "kind": r["kind"], "repeat_of": r["repeat_of"]}
                    for r in data["assignments"]])
            if data["events"]:
                conn.execute(insert(judgments), [
                    {"event_id": uuid.uuid4().hex, "session_id": sid, "stakeholder_id": ids[e["stakeholder"]],
                     "position": e["position"], "revision": e["revision"], "response": e["response"],
                     "confidence": e["confidence"], "latency_ms": e["latency_ms"], "created_at": e["created_at"],
                     "reason": e["reason"]}
                    for e in data["events"]])
            if data["fit_runs"]:
                conn.execute(insert(fit_runs), [{**run, "run_id": uuid.uuid4().hex, "session_id": sid}
                                                for run in data["fit_runs"]])
        if copy is not None:
            remember_copy(copy)
        return created


# ---------------------------------------------------------------------- parsing exports

def timestamp(value: Any, what: str) -> str:
    """An ISO 8601 timestamp read from a file (missing: now)."""
    if value is None or (isinstance(value, float) and value != value):
        return now_utc()
    text = str(value)
    try:
        if len(text) > 40:
            raise ValueError
        datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{what} must be an ISO date and time, got {text[:30]!r}.") from None
    return text


def parse_export(payload: str | bytes | dict) -> dict:
    """Validate an exported session (JSON or CSV) and return it as plain data; ValueError if malformed."""
    if isinstance(payload, (bytes, bytearray)):
        payload = read_upload(bytes(payload), "session", max_bytes=MAX_SESSION_BYTES)
    if isinstance(payload, str):
        if len(payload) > MAX_SESSION_BYTES:
            raise ValueError("The session file is larger than 50 MB.")
        stripped = payload.lstrip()
        if stripped.startswith("{"):
            payload = parse_json_text(stripped)
        elif stripped.startswith("# {"):
            payload = parse_csv_export(stripped)
        else:
            raise ValueError("Not a session export: expected the JSON or CSV written by 'Export session'.")
    if not isinstance(payload, dict) or payload.get("format") != EXPORT_FORMAT:
        raise ValueError("Not a session export: the 'format' field is missing or wrong.")
    try:
        return check_export(payload)
    except (TypeError, KeyError, AttributeError, OverflowError) as err:
        raise ValueError(f"The session file is malformed ({type(err).__name__}: {err}).") from None


def check_export(payload: dict) -> dict:
    """Every part of an export checked against the session's settings and data size."""
    version = whole(payload.get("schema_version"), "schema_version")
    if version > SCHEMA_VERSION:
        raise ValueError("The export comes from a newer version of the dashboard.")
    if version < 1:
        raise ValueError(f"schema_version must be 1 or more; got {version}. Export the session again.")
    for part in ("stakeholders", "assignments", "events"):
        if not isinstance(payload.get(part), list):
            raise ValueError(f"The session export has no {part!r} section (a list).")
    s = payload.get("session")
    if not isinstance(s, dict) or "config" not in s:
        raise ValueError("The session export has no session settings.")
    if not isinstance(s["config"], dict):
        raise ValueError("The session's settings ('config') must be a JSON object.")
    config = ElicitationPlan.from_dict(s["config"])
    n = whole(s.get("n_individuals", session_size(config)), "n_individuals")
    if not 2 <= n <= COMPAS_ROWS:
        raise ValueError(f"The session says it has {n} people, but the {config.dataset} data has "
                         f"{COMPAS_ROWS}; pairs must name rows 0..{COMPAS_ROWS - 1}.")
    core = s.get("core_pairs", [])
    if not isinstance(core, list) or any(not isinstance(p, list) or len(p) != 2 for p in core):
        raise ValueError("core_pairs must be a list of [i, j] pairs.")
    core = [check_pair(p[0], p[1], n, "Core pair") for p in core]
    status = s.get("status", "open")
    if status not in ("open", "closed"):
        raise ValueError(f"The session status must be open or closed, got {status!r}.")
    name = s.get("name", "Imported session")
    if not isinstance(name, str):
        raise ValueError(f"The session's name must be text, got {name!r:.40}.")
    s = {"name": check_session_name(name[:100]),
         "created_at": timestamp(s.get("created_at"), "The session's creation time"),
         "status": status, "simulated": flag(s.get("simulated"), "The session's 'simulated'"),
         "config": config.session_dict(), "core_pairs": [list(p) for p in core],
         # a synthetic session made before its copy's size was stored says COMPAS_ROWS; its pairs
         # are checked against the copy below, and the copy's size is what it keeps
         "n_individuals": session_size(config) if config.synthetic else n}
    people, seen = [], set()
    for p in payload["stakeholders"]:
        if not isinstance(p, dict) or not isinstance(p.get("id"), str) or not isinstance(p.get("pseudonym"), str):
            raise ValueError("Every stakeholder needs a text 'id' and 'pseudonym'.")
        if p["id"] in seen:
            raise ValueError(f"Stakeholder id {p['id']!r} appears twice.")
        try:
            pseudonym = check_pseudonym(p["pseudonym"])
        except ValueError as err:
            raise ValueError(f"Stakeholder {p['id'][:20]!r}: {err}") from None
        seen.add(p["id"])
        people.append({"id": p["id"], "pseudonym": pseudonym,
                       "simulated": flag(p.get("simulated"), f"Stakeholder {p['id'][:20]!r}'s 'simulated'"),
                       "joined_at": timestamp(p.get("joined_at"), "A joining time")})
    if len({p["pseudonym"] for p in people}) != len(people):
        raise ValueError("Two stakeholders share a pseudonym.")
    plan, slots = [], set()
    for r in payload["assignments"]:
        if not isinstance(r, dict) or not isinstance(r.get("stakeholder"), str) or r["stakeholder"] not in seen:
            raise ValueError("An assignment refers to an unknown stakeholder.")
        a, b = check_pair(r.get("a"), r.get("b"), n, "Assignment pair")
        pos = check_position(r.get("position"))
        if r.get("kind") not in ("core", "random", "repeat"):
            raise ValueError(f"Assignment kind must be core, random or repeat, got {r.get('kind')!r}.")
        key = (r["stakeholder"], pos)
        if key in slots:
            raise ValueError(f"Stakeholder {r['stakeholder']!r} has card {pos} twice.")
        slots.add(key)
        plan.append({"stakeholder": r["stakeholder"], "position": pos, "a": a, "b": b, "kind": r["kind"],
                     "repeat_of": whole(r.get("repeat_of", -1), "repeat_of")})
    for r in plan:
        if r["repeat_of"] != -1 and (r["stakeholder"], r["repeat_of"]) not in slots:
            raise ValueError(f"Card {r['position']} of {r['stakeholder']!r} repeats card {r['repeat_of']}, "
                             "which that stakeholder does not have.")
    check_population([*core, *((r["a"], r["b"]) for r in plan)], config)
    options = set(RESPONSE_MODES[config.response_mode]) | {SKIP, RETRACT}
    events, revs = [], set()
    for e in payload["events"]:
        if not isinstance(e, dict):
            raise ValueError("Every event must be an object.")
        if not isinstance(e.get("stakeholder"), str) or not isinstance(e.get("response"), str):
            raise ValueError("Every event needs the text 'stakeholder' and 'response' it was given with.")
        key = (e.get("stakeholder"), check_position(e.get("position")))
        if key not in slots:
            raise ValueError(f"An event refers to card {key[1]} of {key[0]!r}, which is not assigned.")
        if e.get("response") not in options:
            raise ValueError(f"Event response {e.get('response')!r} is not allowed in this session.")
        rev = whole(e.get("revision"), "revision")
        if not 1 <= rev <= MAX_REVISION or (*key, rev) in revs:
            raise ValueError(f"Revision {rev} of card {key[1]} of {key[0]!r} is invalid or repeated.")
        revs.add((*key, rev))
        conf, lat = optional(e.get("confidence")), optional(e.get("latency_ms"))
        if conf is not None and not 1 <= whole(conf, "confidence") <= 5:
            raise ValueError(f"Confidence on card {key[1]} of {key[0]!r} must be 1 to 5.")
        if lat is not None and not (isinstance(lat, (int, float)) and not isinstance(lat, bool)
                                    and 0 <= lat <= MAX_LATENCY_MS):
            raise ValueError(f"Latency on card {key[1]} of {key[0]!r} must be a number of milliseconds from 0 "
                             f"to {MAX_LATENCY_MS:.0e}; got {lat!r:.40}.")
        events.append({"stakeholder": key[0], "position": key[1], "revision": rev, "response": e["response"],
                       "confidence": None if conf is None else whole(conf, "confidence"),
                       "latency_ms": None if lat is None else float(lat),
                       "created_at": timestamp(e.get("created_at"), "An answer time"),
                       "reason": imported_reason(e.get("reason"), key)})
    events.sort(key=lambda ev: ev["revision"])  # replay by revision, file order otherwise
    runs = payload.get("fit_runs")  # absent from CSV exports and from schema-1 files
    runs = [] if runs is None else runs
    if not isinstance(runs, list):
        raise ValueError("fit_runs must be a list of runs.")
    runs = [imported_run(run) for run in runs]
    if len({(r["constraint_hash"], r["settings_hash"]) for r in runs}) != len(runs):
        raise ValueError("A fit run appears twice in the export.")
    out = {"format": EXPORT_FORMAT, "schema_version": SCHEMA_VERSION, "session": s,
           "stakeholders": people, "assignments": plan, "events": events, "fit_runs": runs}
    copy = payload.get("synthetic_copy")
    if copy is not None:
        if not config.synthetic:
            raise ValueError("A session showing real records carries no synthetic copy.")
        copy = copy_from_json(copy)
        if (copy.copy_id, copy.plan.population, copy.plan.epsilon) != (config.pair_copy, config.population,
                                                                        config.pair_epsilon):
            raise ValueError(f"The export's synthetic copy ({copy.copy_id}) is not the one its session names.")
        if copy.plan.simulated:
            raise ValueError("A simulated copy cannot be imported as a session's people.")
        out["synthetic_copy"] = copy
    return out


def check_pair(a: Any, b: Any, n: int, what: str) -> tuple[int, int]:
    a, b = whole(a, what), whole(b, what)
    if not (0 <= a < n and 0 <= b < n) or a == b:
        raise ValueError(f"{what} ({a}, {b}) is not two different individuals in 0..{n - 1}.")
    return a, b


def check_population(pairs: list, config: ElicitationPlan) -> None:
    """Every person in the session's pairs belongs to its population (for a synthetic-copy session:
    is one of its synthetic people), else ValueError naming one."""
    if not pairs:
        return
    outside = outside_session_people(np.asarray(pairs, dtype=np.int64), config)
    if outside.size and config.synthetic:
        raise ValueError(f"The session's pairs must show its synthetic people (numbers 0 to "
                         f"{SYNTHETIC_PEOPLE - 1}); {outside.size} number(s) are beyond them, "
                         f"e.g. {int(outside[0])}.")
    if outside.size:
        raise ValueError(f"The session's pairs must show people of its population "
                         f"({COMPAS_POPULATIONS[config.population]}); {outside.size} person(s) are "
                         f"outside it, e.g. row {int(outside[0])}.")


def check_position(value: Any) -> int:
    pos = whole(value, "position")
    if not 0 <= pos < MAX_POSITION:
        raise ValueError(f"Card position {pos} is out of range.")
    return pos


def imported_reason(value: Any, card: tuple) -> str | None:
    """A reason read from an export (missing in older files); errors name the card."""
    try:
        return check_reason(optional(value))
    except ValueError as err:
        raise ValueError(f"Card {card[1]} of {card[0]!r}: {err}") from None


def imported_run(run: Any) -> dict:
    """A fit run read from an export, validated like a new one."""
    if not isinstance(run, dict):
        raise ValueError("Every fit run must be an object.")
    values = check_run(run.get("constraint_hash"), run.get("aggregation"), run.get("learner"), run,
                       optional(run.get("code_version")))
    note = optional(run.get("note"))
    return {**values, "settings_hash": config_digest({"aggregation": values["aggregation"],
                                                     "learner": values["learner"]}),
            "created_at": timestamp(run.get("created_at"), "A fit run's time"),
            "superseded": flag(run.get("superseded"), "A fit run's 'superseded'"),
            "note": None if note is None else str(note)[:MAX_NOTE_LENGTH]}


def parse_csv_export(text_: str) -> dict:
    first, _, body = text_.partition("\n")
    try:
        header = parse_json_text(first[2:])
    except ValueError:
        raise ValueError("The CSV export's first line is not the settings comment.") from None
    columns = body.partition("\n")[0].count(",") + 1
    if columns > MAX_COLUMNS:  # a session export has a couple of dozen columns; refuse before parsing
        raise ValueError(f"The CSV export's header has {columns:,} columns; a session export has far fewer "
                         f"(at most {MAX_COLUMNS:,} are read).")
    try:
        # Only empty cells are missing: a reason such as "NA" or "None" stays text.
        rows = pd.read_csv(io.StringIO(body), keep_default_na=False, na_values=[""],
                           dtype={"stakeholder": str, "event_id": str, "response": str,
                                  "pseudonym": str, "kind": str, "reason": str})
    except Exception as err:  # pandas raises several parser error types
        raise ValueError(f"The CSV export could not be read: {err}") from None
    for col in FREE_TEXT_COLUMNS:
        if col in rows:
            rows[col] = rows[col].map(unguard_cell)
    need = {"stakeholder", "position", "a", "b", "kind", "repeat_of", "revision", "response", "pseudonym"}
    missing = need - set(rows.columns)
    if missing:
        raise ValueError(f"The CSV export lacks columns {sorted(missing)}.")
    people = rows.drop_duplicates("stakeholder")
    plan = rows.drop_duplicates(["stakeholder", "position"])
    ev = rows[rows["response"].notna()]
    none_if_nan = lambda v: None if pd.isna(v) else v  # noqa: E731
    return {**header,
            "stakeholders": [{"id": r["stakeholder"], "pseudonym": r["pseudonym"],
                              "simulated": str(r.get("simulated", "False")) == "True",
                              "joined_at": none_if_nan(r.get("joined_at"))} for r in people.to_dict("records")],
            "assignments": plan[["stakeholder", "position", "a", "b", "kind", "repeat_of"]].to_dict("records"),
            "events": [{"stakeholder": r["stakeholder"], "position": r["position"], "revision": r["revision"],
                        "response": r["response"], "confidence": none_if_nan(r.get("confidence")),
                        "latency_ms": none_if_nan(r.get("latency_ms")),
                        "created_at": none_if_nan(r.get("created_at")),
                        "reason": none_if_nan(r.get("reason"))} for r in ev.to_dict("records")]}
