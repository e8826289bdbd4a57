"""The one table of benchmark figures: every headline figure the benchmarks recorded (``timing.record``).

Reads ``benchmarks/results/*.jsonl`` (or ``--results DIR``), prints one markdown table (figure, value as
median with its range, CPU or wall, the 1-minute load average, the date, the command that printed it)
and writes it to ``figures.md`` in the same folder. ``make bench`` ends with it; the README's table is
this file's output.

Run: .venv/bin/python benchmarks/figures.py [--results DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import Figure, results_folder  # noqa: E402

HEADER = ("| Figure | Value: median (range) | Clock | Load (1 min) | Date (UTC) | Command |\n"
          "| --- | --- | --- | --- | --- | --- |")


def number(x: float) -> str:
    """About three significant digits, thousands separated."""
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def value_text(f: Figure) -> str:
    """'median unit (low-high)', the range left out when it is one number."""
    unit = f.unit if f.unit in ("x", "%") else f" {f.unit}" if f.unit else ""
    median, low, high = number(f.median), number(f.low), number(f.high)
    return f"{median}{unit}" + ("" if low == high else f" ({low}-{high})")


def row(f: Figure) -> str:
    cells = (f.figure, value_text(f), f.clock, f"{f.load:.1f}", f.date, f"`{f.command}`")
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def read(folder: Path) -> list[Figure]:
    """Every recorded figure, script by script (in name order), each script's in the order it wrote them."""
    figures = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                figures.append(Figure(**json.loads(line)))
    return figures


def table(figures: list[Figure]) -> str:
    return "\n".join([HEADER, *(row(f) for f in figures)]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=None, help="folder of the *.jsonl records")
    args = ap.parse_args()
    folder = args.results or results_folder()
    figures = read(folder) if folder.is_dir() else []
    if not figures:
        print(f"No recorded figures in {folder}: run make bench (or a benchmarks/*_bench.py) first.")
        return
    text = table(figures)
    (folder / "figures.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
