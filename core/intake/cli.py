"""``python -m core data ...``: profile a curator's file into a draft schema, check it, apply it.

    python -m core data profile FILE --out SCHEMA.json [--name NAME]
    python -m core data check FILE --schema SCHEMA.json
    python -m core data apply FILE --schema SCHEMA.json --out CLEAN.csv [--seed N]
    python -m core data check-folder / declare-folder / release-folder ...   (core.synthesis.folder_cli)

FILE is CSV, Parquet or Excel (.xlsx). What these commands print
(profiles, problems, cleaning counts) is CURATOR-ONLY: it is for the curator's terminal, not for a
report. Exit codes: 0 done; 1 ``check``/``apply`` found a problem that blocks a run; 2 the input
could not be read.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from core.intake.check import check, clean
from core.intake.profile import profile
from core.intake.read import read_table
from core.intake.schema import DataSchema
from core.intake.suggest import draft_schema
from core.report import guarded_csv
from core.uploads import DEFAULT_MAX_BYTES, parse_json_text, read_text

__all__ = ["add_data_parser", "run_data_command"]


def add_data_parser(sub: argparse._SubParsersAction) -> None:
    """The ``data`` command and its three steps, on the main parser's sub-commands."""
    data = sub.add_parser("data", help="profile, check and clean your own data file (curator-only output)")
    steps = data.add_subparsers(dest="data_command", required=True)
    for name, what in (("profile", "profile FILE and write a draft schema (suggestions taken)"),
                       ("check", "list every problem of FILE under a schema"),
                       ("apply", "write FILE cleaned by a schema")):
        step = steps.add_parser(name, help=what)
        step.add_argument("file", type=Path, help="CSV, Parquet or Excel (.xlsx) file")
        if name != "profile":
            step.add_argument("--schema", type=Path, required=True, help="the schema JSON")
        if name != "check":
            step.add_argument("--out", type=Path, required=True,
                              help="where to write the draft schema (JSON)" if name == "profile"
                              else "where to write the cleaned table (CSV)")
        if name == "profile":
            step.add_argument("--name", default="", help="name of the data set (default: the file name)")
        if name == "apply":
            step.add_argument("--seed", type=int, default=None,
                              help="seed of contribution bounding (default: the schema's bounding_seed)")
        step.add_argument("--max-mb", type=float, default=DEFAULT_MAX_BYTES / 1e6,
                          help="largest file read, in MB (default: the upload limit)")
    from core.synthesis.folder_cli import add_folder_parsers
    add_folder_parsers(steps)


def load_schema(path: Path) -> DataSchema:
    """A schema JSON file written by ``data profile`` (and edited by the curator)."""
    return DataSchema.from_dict(parse_json_text(read_text(path)))


def run_data_command(args: argparse.Namespace) -> int:
    """Run one ``data`` step; ValueError/OSError propagate to the caller (exit 2)."""
    from core.synthesis.folder_cli import FOLDER_COMMANDS, run_folder_command
    if args.data_command in FOLDER_COMMANDS:
        return run_folder_command(args)
    frame = read_table(args.file, max_bytes=int(args.max_mb * 1e6))
    if args.data_command == "profile":
        prof = profile(frame)
        schema = draft_schema(frame, args.name or args.file.stem).replace(file_suffix=args.file.suffix.lower())
        print(f"{prof.rows:,} rows x {len(prof.columns)} columns (curator-only: do not share this output)")
        for col, declared in zip(prof.columns, schema.columns):
            print(f"{col.name}: looks like {col.guess}; {col.distinct:,} distinct, {col.missing:,} missing"
                  + (f", {col.numbers_as_text:,} numbers written as text" if col.numbers_as_text else "")
                  + f" -> {declared.role}" + (f", merges {len(declared.merges)}" if declared.merges else ""))
        args.out.write_text(json.dumps(schema.to_dict(), indent=2) + "\n")
        print(f"Draft schema written to {args.out}; edit it, then run `python -m core data check`.")
        return 0
    schema = load_schema(args.schema)
    if args.data_command == "check":
        problems = check(frame, schema)
        for problem in problems:
            print(problem.line())
        blocking = sum(p.blocks for p in problems)
        print(f"{len(problems)} problem(s), {blocking} blocking a run.")
        return 1 if blocking else 0
    try:
        cleaned = clean(frame, schema, args.seed)
    except ValueError as exc:
        print(exc)
        return 1
    args.out.write_text(guarded_csv(cleaned.frame))
    for line in cleaned.report.lines():
        print(line)
    print(f"Cleaned table written to {args.out}.")
    return 0
