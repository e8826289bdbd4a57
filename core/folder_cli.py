"""``python -m core data ...`` for a folder of Parquet parts on this machine.

    python -m core data check-folder FOLDER --schema SCHEMA.json
    python -m core data declare-folder FOLDER --schema SCHEMA.json
    python -m core data release-folder NAME --out DIR [--method mst|aim] [--epsilon 1] [--delta 1e-6] [--parts 4]

``check-folder`` lists every problem of every part (counts as size bands); ``declare-folder`` checks, then
saves the declaration and the folder's path in the project database (``DASHBOARD_DB_URL``);
``release-folder`` makes a secure synthetic copy of a declared folder set through the project ledger
(reserved against the data set's cap, then committed; the cap must be decided first on the Privacy ledger
page). Counting and sampling go to the Dask cluster named by ``DASHBOARD_DASK_SCHEDULER`` when it is set.
Progress goes to standard error, one line per step ("[7/20] part 7 of 20 checked").
Exit codes: 0 done; 1 a problem blocks it; 2 the input could not be read.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.intake.folder import check_folder, list_folder
from core.intake.schema import DataSchema
from core.intake.store import DataSetStore
from core.privacy.project_ledger import ProjectLedger
from core.releases import folder_copy_release, run_release
from core.synthesis.folder_release import FolderReleasePlan
from core.uploads import parse_json_text, read_text

__all__ = ["FOLDER_COMMANDS", "add_folder_parsers", "progress_lines", "run_folder_command"]

FOLDER_COMMANDS = ("check-folder", "declare-folder", "release-folder")


def add_folder_parsers(steps: argparse._SubParsersAction) -> None:
    """The three folder steps, beside ``data profile/check/apply``."""
    for name, what in (("check-folder", "list every problem of a folder of Parquet parts under a schema"),
                       ("declare-folder", "check a folder of parts, then save its schema and path")):
        step = steps.add_parser(name, help=what)
        step.add_argument("folder", help="the folder of .parquet parts (a path on this machine)")
        step.add_argument("--schema", type=Path, required=True, help="the schema JSON")
    step = steps.add_parser("release-folder", help="a secure synthetic copy of a declared folder set, in parts")
    step.add_argument("name", help="the declared folder set")
    step.add_argument("--out", required=True, help="the new or empty folder the synthetic parts go to")
    step.add_argument("--method", choices=("mst", "aim"), default="mst")
    step.add_argument("--epsilon", type=float, default=1.0)
    step.add_argument("--delta", type=float, default=1e-6)
    step.add_argument("--parts", type=int, default=4, help="parts of the synthetic file")
    step.add_argument("--aim-rounds", type=int, default=0, help="AIM's rounds (0: its default)")


def progress_lines(stream=None):
    """A ``progress(done, total, message)`` that writes each new message as one line to ``stream``
    (standard error by default), so a long run on a terminal shows where it is."""
    last = [None]

    def report(done: int, total: int, message: str = "") -> None:
        if message != last[0]:
            last[0] = message
            print(f"[{done}/{total}] {message}", file=stream or sys.stderr, flush=True)
    return report


def run_folder_command(args: argparse.Namespace) -> int:
    """Run one folder step; ValueError/OSError propagate to the caller (exit 2)."""
    store = DataSetStore()
    if args.data_command in ("check-folder", "declare-folder"):
        listing = list_folder(args.folder)
        schema = DataSchema.from_dict(parse_json_text(read_text(args.schema)))
        checked = check_folder(listing, schema, progress=progress_lines())
        for problem in checked.problems:
            print(problem.line())
        print(f"{listing.n_parts} part(s); {len(checked.problems)} problem(s), {len(checked.blocking)} blocking "
              "a run (counts as size bands).")
        if checked.blocking:
            return 1
        if args.data_command == "declare-folder":
            store.save(schema, replace=store.get(schema.name) is not None)
            store.save_folder(schema.name, listing.folder)
            print(f"Saved {schema.name} as a folder set ({listing.folder}).")
        return 0
    schema, folder = store.get(args.name), store.folder(args.name)
    if schema is None or folder is None:
        raise ValueError(f"No folder set named {args.name!r} is declared; run `python -m core data declare-folder`.")
    plan = FolderReleasePlan(schema.name, args.method, args.epsilon, args.delta, args.out, args.parts,
                             args.aim_rounds)
    release = folder_copy_release(plan, schema, folder, page="command line")
    result = run_release(release, ProjectLedger(), progress=progress_lines()).value()
    for item, value in zip(result.summary["item"], result.summary["value"]):
        print(f"{item}: {value}")
    print(result.statement)
    return 0
