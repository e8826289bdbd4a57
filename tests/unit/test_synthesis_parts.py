"""Data in Parquet parts: count tables, MST and AIM fits and synthetic files are the same bit for bit
whether the rows are counted in one pass in-process, part by part on local workers, or on a Dask
LocalCluster; each fit reads the parts once; values outside the declared domain are refused."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.cluster import close_clients, use_scheduler
from core.datasets import cps_domain, load_dataset
from core.synthesis.aim import AIM
from core.synthesis.counts import ArrayCounts
from core.synthesis.encoding import encode_categories
from core.synthesis.parts import PartCounts, sample_in_parts, split_sizes
from core.synthesis.synthesizers import MST

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick

COLUMNS = ["age_band", "education", "sex", "race", "income", "marital"]


@pytest.fixture(scope="module")
def people() -> pd.DataFrame:
    return load_dataset("cps")[COLUMNS].sample(6000, random_state=5).reset_index(drop=True)


@pytest.fixture(scope="module")
def labels() -> dict[str, list[str]]:
    domain = cps_domain()
    return {c: domain[c] for c in COLUMNS}


@pytest.fixture(scope="module")
def folder(tmp_path_factory, people) -> str:
    """Four parts of uneven size; two store text, two store categories in their own order (as
    separately written files do)."""
    out = tmp_path_factory.mktemp("parts")
    cuts = [0, 900, 2500, 4100, len(people)]
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        part = people.iloc[a:b].copy()
        for col in COLUMNS:
            part[col] = part[col].astype(str) if i % 2 else part[col].cat.reorder_categories(
                list(reversed(part[col].cat.categories)))
        part.to_parquet(out / f"part-{i}.parquet", index=False)
    return str(out)


@pytest.fixture(scope="module")
def codes(people):
    frame, domain, _ = encode_categories(people)
    return frame, domain


def test_part_tables_equal_in_memory_tables_in_one_pass(folder, labels, codes):
    frame, domain = codes
    whole = ArrayCounts(frame, domain)
    parts = PartCounts(folder, labels, n_jobs=2)
    cliques = [(c,) for c in COLUMNS] + [("age_band", "income"), ("sex", "race", "income")]
    parts.count(cliques)
    assert parts.passes == 1 and parts.n_parts == 4
    for clique in cliques:
        np.testing.assert_array_equal(parts.table(clique), whole.table(clique))
    assert parts.passes == 1          # every table of the set came from that one pass


@pytest.mark.parametrize("synthesizer", [MST, lambda: AIM(max_rounds=6)], ids=["mst", "aim"])
def test_fits_on_parts_equal_fits_on_rows_and_read_the_parts_once(folder, labels, codes, synthesizer):
    frame, domain = codes
    on_rows = synthesizer().fit(frame, domain, 0.4, np.random.default_rng(11))
    source = PartCounts(folder, labels, n_jobs=1)
    on_parts = synthesizer().fit(source, None, 0.4, np.random.default_rng(11))
    assert source.passes == 1
    assert on_rows.sample(3000, np.random.default_rng(2)).equals(on_parts.sample(3000, np.random.default_rng(2)))


def test_counting_and_sampling_on_a_cluster_equal_in_process(folder, labels, tmp_path, dask_cluster):
    fitted = MST().fit(PartCounts(folder, labels, n_jobs=1), None, 0.4, np.random.default_rng(1))
    in_process = PartCounts(folder, labels, n_jobs=1)
    in_process.count([("age_band", "income"), ("race",)])
    whole = sample_in_parts(fitted, 10_001, 3, seed=8, labels=labels, n_jobs=1)
    try:
        with use_scheduler(dask_cluster.scheduler_address):
            remote = PartCounts(folder, labels)
            remote.count([("age_band", "income"), ("race",)])
            written = sample_in_parts(fitted, 10_001, 3, seed=8, labels=labels, folder=tmp_path / "synthetic")
    finally:
        close_clients()
    for clique in [("age_band", "income"), ("race",)]:
        np.testing.assert_array_equal(remote.table(clique), in_process.table(clique))
    assert [len(p) for p in whole] == split_sizes(10_001, 3) == [3334, 3334, 3333]
    for frame, path in zip(whole, written):
        pd.testing.assert_frame_equal(frame, pd.read_parquet(path))


def test_sampling_in_parts_is_the_same_in_any_number_of_workers(folder, labels):
    fitted = MST().fit(PartCounts(folder, labels, n_jobs=1), None, 0.4, np.random.default_rng(1))
    one = sample_in_parts(fitted, 5000, 4, seed=3, n_jobs=1)
    two = sample_in_parts(fitted, 5000, 4, seed=3, n_jobs=2)
    assert all(a.equals(b) for a, b in zip(one, two))
    assert not one[0].equals(one[1].iloc[:len(one[0])])   # each part has its own generator


def test_undeclared_values_missing_columns_and_empty_folders_are_refused(tmp_path, labels, people):
    bad = people.head(50).copy()
    bad["sex"] = bad["sex"].astype(str)
    bad.loc[3, "sex"] = "F"
    bad.to_parquet(tmp_path / "part-0.parquet", index=False)
    with pytest.raises(ValueError, match=r"'sex' of part part-0.parquet holds 'F'"):
        PartCounts(tmp_path, labels, n_jobs=1).count([("sex",)])
    with pytest.raises(ValueError, match="not declared"):
        PartCounts(tmp_path, labels, n_jobs=1).count([("county",)])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no .parquet files"):
        PartCounts(empty, labels)
    with pytest.raises(ValueError, match="not a folder"):
        PartCounts(tmp_path / "nowhere", labels)
