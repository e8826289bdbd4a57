"""Microdata too large for one machine: a folder of Parquet parts, read part by part where it lives.

- :class:`PartCounts` is a count source (:mod:`core.synthesis.counts`) over the parts. Each call of
  ``count(cliques)`` is one pass: every part is read (only the columns needed), encoded with the
  public labels, and counted for every clique of the set; the parts' integer tables are added up.
  The parts are handed out through :func:`core.parallel.map_trials`, so they are counted by this
  machine's workers, or by a Dask cluster's when one is configured: only the file names travel, the
  workers read the parts themselves (one part in memory per worker), and only count tables come back.
- :func:`sample_in_parts` draws a large synthetic file in parts, each with its own child generator
  spawned from one seed, so the file is the same wherever and in whatever order the parts run.

The model is fitted where the caller runs, from the count tables alone.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from core.contracts import SeedLike
from core.parallel import map_trials
from core.synthesis.counts import Clique, count_tables

__all__ = ["PartCounts", "part_files", "read_part_codes", "sample_in_parts", "split_sizes"]


def part_files(folder) -> list[Path]:
    """The Parquet parts of ``folder`` (``*.parquet``, in name order); ValueError when there are none."""
    path = Path(folder).expanduser()
    if not path.is_dir():
        raise ValueError(f"{folder} is not a folder on this machine; give the folder that holds the Parquet parts.")
    files = sorted(p for p in path.glob("*.parquet") if p.is_file())
    if not files:
        raise ValueError(f"The folder {folder} holds no .parquet files; write the table as Parquet parts "
                         "(e.g. dask.dataframe.to_parquet or pyarrow.dataset.write_dataset).")
    return files


def read_part_codes(path, labels: Mapping[str, Sequence]) -> np.ndarray:
    """One part as an (n, d) int64 array of codes: each column's values looked up in its public labels.

    ValueError naming the column and the part when a value is not one of the labels (the public
    domain must be declared, never read from the data) or a column is missing.
    """
    import pyarrow.parquet as pq

    columns = list(labels)
    try:
        frame = pq.read_table(path, columns=columns).to_pandas()
    except (KeyError, ValueError) as exc:
        raise ValueError(f"Part {Path(path).name} lacks a column of {columns}: {exc}") from None
    out = np.empty((len(frame), len(columns)), dtype=np.int64)
    for j, col in enumerate(columns):
        series = frame[col]
        if not isinstance(series.dtype, pd.CategoricalDtype):
            series = series.astype("category")
        codes = series.cat.set_categories(list(labels[col])).cat.codes.to_numpy(dtype=np.int64)
        if codes.size and codes.min() < 0:
            bad = series[codes < 0].astype(object).iloc[0]
            raise ValueError(f"Column {col!r} of part {Path(path).name} holds {bad!r}, which is not one of its "
                             f"{len(labels[col])} declared values; declare it, merge it, or drop those rows.")
        out[:, j] = codes
    return out


def _count_part(path, labels: Mapping[str, Sequence], cliques: Sequence[Clique],
                read=read_part_codes) -> dict[Clique, np.ndarray]:
    """The integer count tables of ``cliques`` over one part, encoded by ``read(path, labels=labels)`` (runs
    where the part is read)."""
    arr = read(path, labels=labels)
    index = {c: j for j, c in enumerate(labels)}
    domain = {c: len(v) for c, v in labels.items()}
    return count_tables(arr, index, domain, cliques)


class PartCounts:
    """Count tables of the rows in a folder of Parquet parts (see the module docstring).

    ``labels`` maps each column to its public values in code order (the declared domain);
    ``passes`` counts the passes over the parts so far, ``n_parts`` the parts.
    """

    def __init__(self, folder, labels: Mapping[str, Sequence], *, n_jobs: int | None = None,
                 scheduler: str | None = None) -> None:
        self.files = part_files(folder)
        self.labels = {c: list(v) for c, v in labels.items()}
        if not self.labels or any(len(v) < 1 for v in self.labels.values()):
            raise ValueError("Declare at least one column, each with at least one public value.")
        self.columns = list(self.labels)
        self.domain = {c: len(v) for c, v in self.labels.items()}
        self.n_jobs = n_jobs
        self.scheduler = scheduler
        self.passes = 0
        self._tables: dict[Clique, np.ndarray] = {}

    @property
    def n_parts(self) -> int:
        return len(self.files)

    def count(self, cliques: Iterable[Clique], progress=None) -> None:
        """One pass over the parts counting every table of ``cliques`` not counted yet."""
        todo = list(dict.fromkeys(tuple(c) for c in cliques if tuple(c) not in self._tables))
        if not todo:
            return
        unknown = sorted({c for clique in todo for c in clique} - set(self.columns))
        if unknown:
            raise ValueError(f"Column(s) {unknown} are not declared for these parts.")
        self.passes += 1
        per_part = map_trials(partial(_count_part, labels=self.labels, cliques=todo, read=self.part_reader()),
                              [str(f) for f in self.files],
                              n_jobs=self.n_jobs, progress=progress, label="parts counted", scheduler=self.scheduler)
        for clique in todo:
            total = per_part[0][clique].copy()
            for tables in per_part[1:]:
                total += tables[clique]
            self._tables[clique] = total

    def part_reader(self):
        """``read(path, labels=...)``: one part as its (n, d) codes, wherever the part is read (a count source
        that cleans its parts first changes only this)."""
        return read_part_codes

    def table(self, clique: Clique) -> np.ndarray:
        clique = tuple(clique)
        if clique not in self._tables:
            self.count([clique])
        return self._tables[clique].astype(float)


def split_sizes(n_rows: int, n_parts: int) -> list[int]:
    """``n_rows`` split into ``n_parts`` sizes differing by at most one (the first parts take the rest)."""
    n_rows, n_parts = int(n_rows), int(n_parts)
    if n_rows < 0 or n_parts < 1:
        raise ValueError("Sample a non-negative number of rows in at least one part.")
    base, extra = divmod(n_rows, n_parts)
    return [base + (i < extra) for i in range(n_parts)]


def _sample_part(job: tuple, rng: np.random.Generator, *, model, labels: Mapping[str, Sequence] | None):
    """One part of a synthetic file: ``model.sample(size, rng)`` decoded to labels, written to
    ``path`` as Parquet when a path is given (the part never travels back), else returned."""
    size, path = job
    codes = model.sample(size, rng)
    frame = codes if labels is None else pd.DataFrame(
        {c: pd.Categorical.from_codes(codes[c].to_numpy(), categories=list(labels[c])) for c in codes.columns})
    if path is None:
        return frame
    frame.to_parquet(path, index=False)
    return path


def sample_in_parts(model, n_rows: int, n_parts: int, seed: SeedLike, *, labels: Mapping[str, Sequence] | None = None,
                    folder=None, n_jobs: int | None = None, scheduler: str | None = None, progress=None) -> list:
    """A synthetic file of ``n_rows`` rows drawn from a fitted synthesizer in ``n_parts`` parts.

    Part i draws with the i-th child generator spawned from ``seed`` (``core.contracts.spawn_rngs``),
    so the parts are the same in-process, on local workers or on a cluster. With ``folder`` each part
    is written there as ``part-00000.parquet`` ... by whoever draws it and the paths come back;
    otherwise the parts' frames come back. ``labels`` turns codes back into the declared values.
    """
    sizes = split_sizes(n_rows, n_parts)
    if folder is not None:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        paths = [str(out / f"part-{i:05d}.parquet") for i in range(n_parts)]
    else:
        paths = [None] * n_parts
    return map_trials(partial(_sample_part, model=model, labels=labels), list(zip(sizes, paths)), seed=seed,
                      n_jobs=n_jobs, progress=progress, label="synthetic parts drawn", scheduler=scheduler)
