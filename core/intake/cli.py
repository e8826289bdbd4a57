"""``python -m core data ...``: profile a curator's file into a draft schema, check it, apply it.

    python -m core data profile FILE --out SCHEMA.json [--name NAME] [read options]
    python -m core data check FILE --schema SCHEMA.json [read options]
    python -m core data apply FILE --schema SCHEMA.json --out CLEAN.csv [--seed N] [read options]
    python -m core data check-folder / declare-folder / release-folder ...   (core.synthesis.folder_cli)

FILE is CSV (or other delimited text), Parquet or Excel (.xlsx). Read options (``--encoding``,
``--sep``, ``--sheet``, ``--header-row``, ``--decimal``) override what is detected; ``profile`` writes
the options the file was read with into the draft schema, and ``check``/``apply`` read by the schema's
options unless a flag overrides one. How the file was read (and why) is printed on standard error.
What these commands print (profiles, problems, cleaning counts) is CURATOR-ONLY: it is for the
curator's terminal, not for a report. Exit codes: 0 done; 1 ``check``/``apply`` found a problem that
blocks a run; 2 the input could not be read.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.intake.check import check, clean
from core.intake.profile import profile
from core.intake.options import ENCODINGS, ReadOptions
from core.intake.read import TableRead, read_file, table_suffix
from core.intake.schema import DataSchema
from core.intake.suggest import draft_schema
from core.report import guarded_csv
from core.uploads import DEFAULT_MAX_BYTES, parse_json_text, read_bytes, read_text

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
        step.add_argument("--encoding", default=None, help=f"text encoding, one of {', '.join(ENCODINGS)} "
                                                           "(default: detected)")
        step.add_argument("--sep", default=None, help="separator: comma, semicolon, tab or pipe (default: detected)")
        step.add_argument("--sheet", default=None, help="the workbook sheet to read (default: the first with data)")
        step.add_argument("--header-row", type=int, default=None,
                          help="the row number holding the column names (default: detected past title rows)")
        step.add_argument("--decimal", default=None,
                          help="decimal mark of a text file's numbers: point or comma (default: detected)")
    from core.synthesis.folder_cli import add_folder_parsers
    add_folder_parsers(steps)


def load_schema(path: Path) -> DataSchema:
    """A schema JSON file written by ``data profile`` (and edited by the curator)."""
    return DataSchema.from_dict(parse_json_text(read_text(path)))


def read_with_options(args: argparse.Namespace, declared: ReadOptions | None) -> TableRead:
    """The file read by the flags' options, then the declared ones, detecting the rest; the report goes to
    standard error."""
    flags = ReadOptions(args.encoding, args.sep, args.sheet, args.header_row, args.decimal)
    table_suffix(args.file.name)
    read = read_file(read_bytes(args.file, int(args.max_mb * 1e6)), args.file.name, flags.merged(declared))
    for line in read.report.lines():
        print(f"read: {line}", file=sys.stderr)
    return read


def run_data_command(args: argparse.Namespace) -> int:
    """Run one ``data`` step; ValueError/OSError propagate to the caller (exit 2)."""
    from core.synthesis.folder_cli import FOLDER_COMMANDS, run_folder_command
    if args.data_command in FOLDER_COMMANDS:
        return run_folder_command(args)
    schema = None if args.data_command == "profile" else load_schema(args.schema)
    read = read_with_options(args, None if schema is None else schema.read)
    frame = read.frame
    if args.data_command == "profile":
        prof = profile(frame)
        schema = draft_schema(frame, args.name or args.file.stem).replace(file_suffix=args.file.suffix.lower(),
                                                                          read=read.report.options)
        print(f"{prof.rows:,} rows x {len(prof.columns)} columns (curator-only: do not share this output)")
        for col, declared in zip(prof.columns, schema.columns):
            print(f"{col.name}: looks like {col.guess}; {col.distinct:,} distinct, {col.missing:,} missing"
                  + (f", {col.numbers_as_text:,} numbers written as text" if col.numbers_as_text else "")
                  + f" -> {declared.role}" + (f", merges {len(declared.merges)}" if declared.merges else ""))
        args.out.write_text(json.dumps(schema.to_dict(), indent=2) + "\n")
        print(f"Draft schema written to {args.out}; edit it, then run `python -m core data check`.")
        return 0
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
