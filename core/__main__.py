"""Command line: rerun a saved report or run a hand-written plan, headless.

    python -m core reproduce REPORT.json [--out DIR] [--data FILE ...]
    python -m core run PLAN.json --out DIR [--data FILE ...]
    python -m core data profile|check|apply FILE ...   (your own data file: see core/intake/cli.py)

``reproduce`` reruns the report's plan and checks that every table comes out the same (exit 1 if
not); ``run`` runs a plan file (the ``plan`` object of a report, or a report itself). Tables are
written to DIR as CSV plus ``report.json`` (``reproduce`` without ``--out`` only checks). Uploaded data
are referenced by fingerprint: pass the same file(s) with ``--data`` and they are checked before
anything runs; a plan whose data carries the curator's schema is cleaned by it again. What a plan's run keeps in the
project database (the synthetic copy a fairness elicitation showed) is loaded from it here
(``DASHBOARD_DB_URL``, else the default SQLite file) and passed to the run as its data.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.contracts import plan_from_dict
from core.intake.cli import add_data_parser, run_data_command
from core.report import (build_report, check_upload, guarded_csv, load_plan, parse_report, report_json,
                         run_plan, stored_data, tables_match)
from core.uploads import parse_json_text


def _write(out: Path, result, page: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(result, page=page)
    for name, df in result.tables().items():
        (out / f"{name}.csv").write_text(guarded_csv(df))
    (out / "report.json").write_text(report_json(report))
    return report


def _progress(done: int, total: int, message: str) -> None:
    print(f"\r{message}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, what in (("reproduce", "a report exported by a page"), ("run", "a plan (JSON)")):
        cmd = sub.add_parser(name, help=f"rerun {what}")
        cmd.add_argument("file", type=Path)
        cmd.add_argument("--out", type=Path, required=name == "run",
                         help="folder for the tables and report" + (" (optional: without it, only check)"
                                                                     if name == "reproduce" else ""))
        cmd.add_argument("--data", type=Path, action="append", default=[],
                         help="the uploaded data file(s) the plan ran on, in the order uploaded")
    add_data_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "data":
        try:
            return run_data_command(args)
        except (ValueError, OSError, json.JSONDecodeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        text = args.file.read_text()
        if args.command == "reproduce":
            report = parse_report(text)
            plan = load_plan(report)
        else:
            body = parse_json_text(text)
            report = None
            plan = load_plan(body) if isinstance(body, dict) and "schema" in body else plan_from_dict(body)
        data = check_upload(plan, tuple(p.read_bytes() for p in args.data))
        if data is None:
            data = stored_data(plan)
        result = run_plan(plan, data, progress=_progress)
    except (ValueError, OSError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    page = report.get("page", "") if report else ""
    if args.out is not None:
        _write(args.out, result, page)
    if report is None:
        print(f"Ran {type(plan).__name__}; tables written to {args.out}.")
        return 0
    differ = tables_match(report, result.tables())
    if differ:
        print(f"Reran {type(plan).__name__}, but these tables differ from the report: {', '.join(differ)}.")
        return 1
    print(f"Reproduced {type(plan).__name__}: all {len(report.get('tables', {}))} tables match"
          + (f"; written to {args.out}." if args.out is not None else "."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
