"""Command line: rerun a saved report or run a hand-written plan, headless.

    python -m core reproduce REPORT.json [--out DIR] [--data FILE ...]
    python -m core run PLAN.json --out DIR [--data FILE ...]
    python -m core report REPORT.json [--compare A.json] [--html OUT.html] [--pdf OUT.pdf] [--paper A4|Letter] [--shared]
    python -m core data profile|check|apply FILE ...   (your own data file: see core/intake/cli.py)
    python -m core script REPORT.json [--out reproduce.py] [--notebook reproduce.ipynb] [--data FILE ...]
    python -m core release REPORT.json [--data FILE] [--cap EPSILON | --no-cap] [--out DIR]   (core/release_cli.py)
    python -m core curator add|remove NAME | list | first   (curator keys: see core/access_cli.py)

``reproduce`` reruns the report's plan and checks that every table comes out the same (exit 1 if
not); ``run`` runs a plan file (the ``plan`` object of a report, or a report itself). Tables are
written to DIR as CSV plus ``report.json`` (``reproduce`` without ``--out`` only checks). Uploaded data
are referenced by fingerprint: pass the same file(s) with ``--data`` and they are checked before
anything runs; a plan whose data carries the curator's schema is cleaned by it again. What a plan's run keeps in the
project database (the synthetic copy a fairness elicitation showed) is loaded from it here
(``DASHBOARD_DB_URL``, else the default SQLite file) and passed to the run as its data.

``release`` makes a real release of any of the seven kinds through ``core.releases`` (reserve against the
data set's cap, compute with the secure sampler, commit the spends, then publish) and prints the spends and
the ledger entry.

``report`` makes the stakeholder report of a saved report without rerunning anything: the same HTML
the page offers (the figures the page stored in the file), and its PDF through headless Chromium: either
``--html``, ``--pdf`` or both. With ``--compare A.json`` it is the A/B report of REPORT (B) against A, with
the page's overlays. A confidential
report gives a confidential HTML (marked on every page); ``--shared`` makes its shared report instead.
What ``reproduce``/``run`` write to ``--out`` is every table, so its ``report.json`` is the confidential one
when the data is private.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.contracts import plan_from_dict
from core.access_cli import add_curator_parser, run_curator_command
from core.folder_cli import FOLDER_COMMANDS, add_folder_parsers, run_folder_command
from core.intake.cli import add_data_parser, run_data_command
from core.release_cli import add_release_parser, run_release_command
from core.report import (build_report, check_upload, guarded_csv, load_plan, parse_report, report_json,
                         run_plan, stored_data, tables_match)
from core.script_export import add_script_parser, run_script_command
from core.sharing import CONFIDENTIAL, shared_copy
from core.stakeholder_report import PAPERS
from core.uploads import parse_json_text


def _write(out: Path, result, page: str, question: str = "") -> dict:
    """The rerun's tables as CSV and its ``report.json``, which keeps the saved report's page and question
    (so ``python -m core report`` on it opens with the same question as the page's report)."""
    out.mkdir(parents=True, exist_ok=True)
    report = build_report(result, page=page, audience=CONFIDENTIAL)    # every table is written next to it
    if question:
        report["question"] = question
    for name, df in result.tables().items():
        (out / f"{name}.csv").write_text(guarded_csv(df))
    (out / "report.json").write_text(report_json(report))
    return report


def _progress(done: int, total: int, message: str) -> None:
    print(f"\r{message}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)


def overlays_of(report: dict, compare: dict) -> list:
    """The overlays the page's comparison panel draws (``core.figures.overlays``, shared with the page)."""
    from core.compare import compare_reports
    from core.figures.overlays import overlay_figures
    return overlay_figures(compare_reports(compare, report))


def report_command(args) -> int:
    """``report``: HTML (and PDF) of a saved report, an A/B report with ``--compare``."""
    from core.stakeholder_report import report_html_from_json, report_pdf
    if args.html is None and args.pdf is None:
        raise ValueError("Say where to write the report: --html OUT.html, --pdf OUT.pdf or both.")
    report = parse_report(args.file.read_text())
    other = parse_report(args.compare.read_text()) if args.compare is not None else None
    if args.shared:
        report = shared_copy(report)
    overlays = overlays_of(report, other) if other is not None else []
    text = report_html_from_json(report, compare=other, overlays=overlays, file_name=args.file.name)
    written = []
    if args.html is not None:
        args.html.write_text(text, encoding="utf-8")
        written.append(str(args.html))
    if args.pdf is not None:
        args.pdf.write_bytes(report_pdf(text, paper=args.paper))
        written.append(str(args.pdf))
    print(f"Wrote the {'A/B ' if other is not None else ''}stakeholder report: {', '.join(written)}.")
    return 0


def _data_command(args: argparse.Namespace) -> int:
    """One ``data`` step: a folder's from core/folder_cli.py, a file's from core.intake."""
    run = run_folder_command if args.data_command in FOLDER_COMMANDS else run_data_command
    return run(args)


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
    rep = sub.add_parser("report", help="the stakeholder report (HTML, PDF) of a saved report")
    rep.add_argument("file", type=Path, help="the report (JSON) a page exported: scenario B with --compare")
    rep.add_argument("--compare", type=Path, help="the report of the pinned scenario A")
    rep.add_argument("--html", type=Path, help="where to write the HTML report")
    rep.add_argument("--pdf", type=Path, help="where to write the PDF (needs Chromium)")
    rep.add_argument("--paper", choices=PAPERS, default=PAPERS[0], help="the PDF's paper size")
    rep.add_argument("--shared", action="store_true",
                     help="make the shared report of a confidential one (numbers of private rows withheld)")
    add_folder_parsers(add_data_parser(sub))  # a file's steps (core.intake) and a folder's (core/folder_cli.py)
    add_curator_parser(sub)
    add_script_parser(sub)   # python -m core script: a report as a Python script / Jupyter notebook
    add_release_parser(sub)  # python -m core release: a real release, headless
    args = parser.parse_args(argv)
    if args.command == "script":
        return run_script_command(args)
    commands = {"report": report_command, "data": _data_command, "release": run_release_command,
                "curator": run_curator_command}
    if args.command in commands:
        try:
            return commands[args.command](args)
        except (ValueError, OSError, json.JSONDecodeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    try:
        text = args.file.read_text()
        if args.command == "reproduce":
            report = source = parse_report(text)
            plan = load_plan(report)
        else:
            body = parse_json_text(text)
            report = None
            source = body if isinstance(body, dict) and "schema" in body else None
            plan = load_plan(body) if source is not None else plan_from_dict(body)
        data = check_upload(plan, tuple(p.read_bytes() for p in args.data))
        if data is None:
            data = stored_data(plan)
        result = run_plan(plan, data, progress=_progress)
    except (ValueError, OSError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    page = str((source or {}).get("page") or "")
    if args.out is not None:
        _write(args.out, result, page, str((source or {}).get("question") or ""))
    if report is None:
        print(f"Ran {type(plan).__name__}; tables written to {args.out}.")
        return 0
    differ = tables_match(report, result.tables())
    if differ:
        print(f"Reran {type(plan).__name__}, but these tables differ from the report: {', '.join(differ)}.")
        return 1
    withheld = (report.get("sharing") or {}).get("withheld_tables") or []
    print(f"Reproduced {type(plan).__name__}: all {len(report.get('tables', {}))} tables match"
          + (f" ({len(withheld)} more were withheld from this shared report)" if withheld else "")
          + (f"; written to {args.out}." if args.out is not None else "."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
