"""Folder-set benchmark: the CPU cost per 100,000 cells of a folder's check, count pass and synthetic write,
beside the coefficients the Data step's time estimates use (``core.intake.folder.FOLDER_COSTS``, or the
"folder" entry of ``core/estimate_costs.json``). Not a test.

A folder of Parquet parts (category columns as text) is written to a temporary folder, then measured in
this process (one worker, so CPU seconds count all the work; each step warm, the median of three after a
discarded call): every part checked against the declaration
(:func:`core.intake.folder.check_folder`), one count pass of every one-way and two-way table through the
declaration (:class:`core.synthesis.folder_release.FolderCounts`, as MST's fit asks), and a synthetic file
of the same size drawn and written in as many parts (:func:`core.synthesis.parts.sample_in_parts`). The
machine's load is printed beside the figures.

Run: .venv/bin/python benchmarks/folder_bench.py [--rows 2000000 --parts 10 --columns 5]
"""
from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from core.estimates import load_costs  # noqa: E402
from core.intake import ColumnSchema, DataSchema  # noqa: E402
from core.intake.folder import check_folder, folder_costs, list_folder  # noqa: E402
from core.synthesis.folder_release import FolderCounts  # noqa: E402
from core.synthesis.parts import sample_in_parts, split_sizes  # noqa: E402
from core.synthesis.synthesizers import MST  # noqa: E402
from timing import load, record, warm_time  # noqa: E402

CATEGORIES = ("Alpha", "Beta", "Gamma", "Delta", "Epsilon", "Zeta")


def write_parts(folder: Path, rows: int, parts: int, columns: int) -> DataSchema:
    """``rows`` rows of ``columns`` text category columns in ``parts`` parts; the declaration that reads them."""
    rng = np.random.default_rng(20261126)
    names = [f"c{j}" for j in range(columns)]
    for i, size in enumerate(split_sizes(rows, parts)):
        frame = pd.DataFrame({n: np.asarray(CATEGORIES, dtype=object)[rng.integers(0, len(CATEGORIES), size)]
                              for n in names})
        frame.to_parquet(folder / f"part-{i:05d}.parquet", index=False)
    return DataSchema("bench", tuple(ColumnSchema(n, "category", categories=CATEGORIES) for n in names),
                      file_suffix=".parquet")


def fresh_folder(parent: Path):
    """A new, empty folder under ``parent`` at each call (so a repeated write starts from nothing)."""
    count = itertools.count()
    return lambda: parent / f"synthetic-{next(count)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--parts", type=int, default=10)
    parser.add_argument("--columns", type=int, default=5)
    args = parser.parse_args()
    coef = folder_costs(load_costs())
    cells = args.rows * args.columns / 1e5
    with tempfile.TemporaryDirectory() as tmp:
        folder, out = Path(tmp) / "parts", Path(tmp) / "synthetic"
        folder.mkdir()
        schema = write_parts(folder, args.rows, args.parts, args.columns)
        listing = list_folder(folder)
        seconds = {}
        seconds["check"] = warm_time(lambda: check_folder(listing, schema, n_jobs=1))
        source = FolderCounts(folder, schema, n_jobs=1)
        cliques = [(c,) for c in source.columns] + list(itertools.combinations(source.columns, 2))
        seconds["count"] = warm_time(lambda: FolderCounts(folder, schema, n_jobs=1).count(cliques))
        source.count(cliques)
        model = MST().fit(source, None, 1.0, np.random.default_rng(1))
        where = fresh_folder(out)
        seconds["write"] = warm_time(lambda: sample_in_parts(model, args.rows, args.parts, 2, labels=source.labels,
                                                             folder=where(), n_jobs=1))
    print(f"Folder set: {args.rows:,} rows x {args.columns} columns in {args.parts} parts, one worker; CPU s: "
          f"median of 3 warm calls (range); {load()}")
    print(f"  {'step':<6} {'CPU s':>18} {'per 100,000 cells':>18} {'estimate uses':>14} {'measured/used':>14}")
    for step, spent in seconds.items():
        per = spent.median / cells
        print(f"  {step:<6} {spent.text(unit=''):>18} {per:>18.4f} {float(coef[step]):>14.4f} "
              f"{per / float(coef[step]):>14.2f}")
        record(f"Folder set {step}, {args.rows:,} rows x {args.columns} columns in {args.parts} parts", spent)


if __name__ == "__main__":
    main()
