"""Recompute every reproducible headline number of the papers and print the table.

Usage: python scripts/reproduce.py [--only KEY ...] [--errors]
Exits 1 when any row fails (its value is outside the tolerance, or its code raised).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.paper_errors import paper_errors_table  # noqa: E402
from core.reproductions import reproductions_table  # noqa: E402


def _progress(done: int, total: int, message: str = "") -> None:
    print(f"\r{done}/{total} rows", end="", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="row keys to run (all when omitted)")
    parser.add_argument("--errors", action="store_true", help="also print the errors found in the papers")
    args = parser.parse_args(argv)
    table = reproductions_table(args.only or None, progress=_progress)
    print(file=sys.stderr)
    shown = table[["key", "paper value", "ours", "tolerance", "difference", "pass", "seconds", "spec"]].copy()
    shown["pass"] = shown["pass"].map({True: "PASS", False: "FAIL"})
    with __import__("pandas").option_context("display.width", 200, "display.max_rows", None,
                                              "display.max_colwidth", 40):
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
        if args.errors:
            print()
            print(paper_errors_table().to_string(index=False))
    failed = table[~table["pass"]]
    for _, row in failed.iterrows():
        print(f"FAILED {row['key']}: paper {row['paper value']:g}, ours {row['ours']:g} "
              f"(tolerance {row['tolerance']:g}) {row['error']}", file=sys.stderr)
    print(f"{len(table) - len(failed)}/{len(table)} rows pass; {table['seconds'].sum():.1f} s of computing.")
    return 1 if len(failed) else 0


if __name__ == "__main__":
    raise SystemExit(main())
