"""``python -m core data ...``: profile a curator's file into a draft schema, check it, apply it.

    python -m core data profile FILE --out SCHEMA.json [--name NAME] [CHOICES] [READ OPTIONS]
    python -m core data edit SCHEMA.json [--out NEW.json] CHOICES
    python -m core data check FILE --schema SCHEMA.json [READ OPTIONS]
    python -m core data apply FILE --schema SCHEMA.json --out CLEAN.csv [--seed N] [READ OPTIONS]
    python -m core data check-folder / declare-folder / release-folder ...   (core/folder_cli.py)

CHOICES are the curator's declarations, each repeatable: ``--missing-token TEXT`` /
``--no-missing-token TEXT`` (read as missing in every column, or no longer), ``--missing-code COLUMN
TEXT`` / ``--no-missing-code COLUMN TEXT`` (one column's own missing codes, such as 999),
``--units COLUMN UNIT`` (a word around the number: ``--units age yrs`` reads "45 yrs") and ``--merge
COLUMN VARIANT LABEL``. ``profile`` prints what the values suggest (missing codes, units, merges, with
their rows); none of it enters the schema unless named here, except the label merges the draft
proposes. ``edit`` changes a schema file (in place unless ``--out``) without reading the data.

READ OPTIONS (``--encoding``, ``--sep``, ``--sheet``, ``--header-row``, ``--decimal``) override what is
detected; ``profile`` writes the options the file was read with into the draft schema, and
``check``/``apply`` read by the schema's options unless a flag overrides one. How the file was read (and
why) is printed on standard error.

FILE is CSV (or other delimited text), Parquet or Excel (.xlsx). What these commands print
(profiles, problems, cleaning counts) is CURATOR-ONLY: it is for the curator's terminal, not for a
report. Exit codes: 0 done; 1 ``check``/``apply`` found a problem that blocks a run; 2 the input
could not be read.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.intake.check import check, clean
from core.intake.hints import named
from core.intake.profile import profile
from core.intake.options import ENCODINGS, ReadOptions
from core.intake.read import TableRead, read_file, table_suffix
from core.intake.schema import DEFAULT_MISSING_TOKENS, DataSchema
from core.intake.suggest import column_suggestions, draft_schema
from core.report import guarded_csv
from core.uploads import DEFAULT_MAX_BYTES, parse_json_text, read_bytes, read_text

__all__ = ["add_data_parser", "run_data_command"]


def _add_choices(step: argparse.ArgumentParser) -> None:
    """The curator's declarations (module docstring), each repeatable."""
    for flag, names, what in (("--missing-token", ("TEXT",), "read TEXT as missing in every column"),
                              ("--no-missing-token", ("TEXT",), "no longer read TEXT as missing"),
                              ("--missing-code", ("COLUMN", "TEXT"), "read TEXT as missing in COLUMN (e.g. 999)"),
                              ("--no-missing-code", ("COLUMN", "TEXT"), "no longer read TEXT as missing in COLUMN"),
                              ("--units", ("COLUMN", "UNIT"), "read numbers written with UNIT (e.g. age yrs)"),
                              ("--merge", ("COLUMN", "VARIANT", "LABEL"), "merge VARIANT into LABEL in COLUMN")):
        step.add_argument(flag, nargs=len(names), metavar=names, action="append", default=[], help=what)


def _with_choices(schema: DataSchema, args: argparse.Namespace) -> DataSchema:
    if args.data_command == "profile":     # the draft is made with the tokens already
        args = argparse.Namespace(**{**vars(args), "missing_token": [], "no_missing_token": []})
    return schema.with_choices(tokens=tuple(t for (t,) in args.missing_token),
                               no_tokens=tuple(t for (t,) in args.no_missing_token),
                               codes=tuple(map(tuple, args.missing_code)),
                               no_codes=tuple(map(tuple, args.no_missing_code)),
                               units=tuple(map(tuple, args.units)), merges=tuple(map(tuple, args.merge)))


def add_data_parser(sub: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """The ``data`` command and its steps, on the main parser's sub-commands; returns the steps, to which
    the command line adds the folder steps (``core/folder_cli.py``, a layer above the intake)."""
    data = sub.add_parser("data", help="profile, check and clean your own data file (curator-only output)")
    steps = data.add_subparsers(dest="data_command", required=True)
    edit = steps.add_parser("edit", help="change a schema file: missing tokens and codes, units, merges")
    edit.add_argument("schema", type=Path, help="the schema JSON")
    edit.add_argument("--out", type=Path, default=None, help="where to write it (default: in place)")
    _add_choices(edit)
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
            _add_choices(step)
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
    return steps


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


def _suggestion_lines(frame, schema: DataSchema, column: str) -> list[str]:
    """What the column's values suggest and is not declared yet, with the flag that declares it."""
    col = schema.column(column)
    found = column_suggestions(frame[column], col.role, col.missing_texts(schema.missing_tokens))
    lines = []
    if found.missing_codes:
        lines.append(f"looks like missing codes: {named(*zip(*found.missing_codes))} (--missing-code {column} TEXT)")
    units = [(u, n) for u, n in found.units if u.lower() not in {x.lower() for x in col.units or ()}]
    if units:
        lines.append(f"numbers written with a unit: {named(*zip(*units))} (--units {column} UNIT)")
    return lines


def run_data_command(args: argparse.Namespace) -> int:
    """Run one ``data`` step; ValueError/OSError propagate to the caller (exit 2)."""
    if args.data_command == "edit":
        schema = _with_choices(load_schema(args.schema), args)
        out = args.out or args.schema
        out.write_text(json.dumps(schema.to_dict(), indent=2) + "\n")
        print(f"Schema written to {out}.")
        return 0
    schema = None if args.data_command == "profile" else load_schema(args.schema)
    read = read_with_options(args, None if schema is None else schema.read)
    frame = read.frame
    if args.data_command == "profile":
        gone = {t.lower() for (t,) in args.no_missing_token}
        tokens = tuple(t for t in DEFAULT_MISSING_TOKENS + tuple(t for (t,) in args.missing_token)
                       if t.lower() not in gone)
        prof = profile(frame, tokens)
        schema = draft_schema(frame, args.name or args.file.stem, tokens, profiled=prof)
        schema = _with_choices(schema.replace(file_suffix=args.file.suffix.lower(), read=read.report.options), args)
        for column in dict.fromkeys(c for c, _ in args.missing_code):    # codes make missing values: the draft's policy
            if schema.column(column).missing is None:
                role = schema.column(column).role
                schema = schema.with_column(column, missing="own_category" if role == "category" else "drop_row")
        print(f"{prof.rows:,} rows x {len(prof.columns)} columns (curator-only: do not share this output)")
        for col, declared in zip(prof.columns, schema.columns):
            print(f"{col.name}: looks like {col.guess}; {col.distinct:,} distinct, {col.missing:,} missing"
                  + (f", {col.numbers_as_text:,} numbers written as text" if col.numbers_as_text else "")
                  + f" -> {declared.role}" + (f", merges {len(declared.merges)}" if declared.merges else ""))
            for line in _suggestion_lines(frame, schema, declared.name):
                print(f"  {line}")
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
