"""map_trials on a Dask cluster: the same numbers as a local run, faults survived, fallback when
the scheduler is away, progress and cancel. Every cluster here listens on 127.0.0.1 only."""
from __future__ import annotations

import dataclasses
import functools
import os
import signal
import socket
import threading
import time

import numpy as np
import pandas as pd
import pytest

from core.cluster import (Backend, ClusterUnavailable, client_for, describe_backend,
                          fill, forget_failures, inside_cluster_task, opened, split_shared, use_scheduler)
from core.contracts import Cancelled
from core.parallel import map_trials
from tests.dask_cluster import loopback_cluster, tasks_seen

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick


@pytest.fixture
def cluster(dask_cluster):
    """The session's shared cluster (two workers): these tests send it work and leave it whole."""
    return dask_cluster


def _noisy_row_sum(item: int, rng: np.random.Generator, table: np.ndarray) -> float:
    return float(table[item].sum() + rng.normal())


def _slow_draw(item: int, rng: np.random.Generator) -> float:
    time.sleep(0.15)
    return float(rng.normal() + item)


def _nested(item: int, rng: np.random.Generator) -> tuple[bool, list[float]]:
    inner = map_trials(_slow_draw, range(2), seed=item)
    return inside_cluster_task(), inner


def _fails(item: int) -> int:
    if item == 3:
        raise ValueError("item 3 is bad")
    return item


def _free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cluster_results_equal_in_process_results_bit_for_bit(cluster):
    table = np.random.default_rng(0).normal(size=(12, 50_000))   # summed rows: order-sensitive floats
    func = functools.partial(_noisy_row_sum, table=table)
    local = map_trials(func, range(12), seed=11, n_jobs=1)
    joblib = map_trials(func, range(12), seed=11, n_jobs=2)
    before = tasks_seen(cluster)
    seen = []
    with use_scheduler(cluster.scheduler_address):
        remote = map_trials(func, range(12), seed=11, progress=lambda d, t, m: seen.append((d, t)))
    assert tasks_seen(cluster) > before
    assert remote == local == joblib
    assert max(seen) == (12, 12) and all(t == 12 for _, t in seen)


def test_the_test_cluster_listens_on_loopback_only(cluster):
    import psutil

    me = psutil.Process()
    listening = [c.laddr for p in (me, *me.children(recursive=True)) for c in p.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN]
    assert len(listening) >= 3                              # scheduler, its dashboard, the workers and nannies
    assert {addr.ip for addr in listening} == {"127.0.0.1"}


def test_large_shared_inputs_are_pulled_out_of_the_tasks():
    big = np.zeros(100_000)
    small = np.zeros(3)
    items = [(i, big, small) for i in range(4)]
    func = functools.partial(_noisy_row_sum, table=big)
    func_skeleton, skeletons, shared = split_shared(func, items)
    assert len(shared) == 1                               # scattered once, for the partial and the items
    np.testing.assert_array_equal(opened(shared[0]), big)
    assert all(s[1] is not big and s[2] is small for s in skeletons)
    assert func_skeleton.keywords["table"] is not big


@dataclasses.dataclass(frozen=True)
class _Job:
    index: int
    rows: np.ndarray
    note: str = "x"


def test_shared_parts_of_frozen_dataclass_and_dict_items_round_trip():
    rows = np.arange(50_000, dtype=np.int64)               # 400 kB, held by every item
    jobs = [_Job(i, rows) for i in range(3)]
    dicts = [{"i": i, "rows": rows} for i in range(3)]
    for items in (jobs, dicts):
        func_skeleton, skeletons, shipments = split_shared(_square_of, items)
        assert func_skeleton is _square_of and len(shipments) == 1
        shared = {0: opened(shipments[0])}
        back = [fill(s, shared) for s in skeletons]
        assert [type(b) for b in back] == [type(i) for i in items]
        for b, i in zip(back, items):
            rows_b, rows_i = (b["rows"], i["rows"]) if isinstance(b, dict) else (b.rows, i.rows)
            np.testing.assert_array_equal(rows_b, rows_i)
    lone = [_Job(i, np.arange(50_000)) for i in range(2)]    # large but not shared: stays in its task
    assert split_shared(_square_of, lone)[2] == []


def _square_of(item) -> int:
    return item.index ** 2 if isinstance(item, _Job) else item["i"] ** 2


def test_a_worker_killed_mid_sweep_does_not_change_the_results(cluster):
    """On the shared cluster: it ends only once the nanny has brought the killed worker back, so the cluster
    is whole again for the next test."""
    local = map_trials(_slow_draw, range(16), seed=5, n_jobs=1)
    client = client_for(cluster.scheduler_address)
    pids = sorted(client.run(os.getpid).values())
    killed: list[int] = []

    def kill_once(done, total, message):
        if done >= 2 and not killed:
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    with use_scheduler(cluster.scheduler_address):
        remote = map_trials(_slow_draw, range(16), seed=5, progress=kill_once)
    assert killed and remote == local
    client.wait_for_workers(2, timeout=60)                 # the nanny brings the worker back
    assert pids[0] not in client.run(os.getpid).values()


def test_unreachable_scheduler_falls_back_to_local_with_a_warning(monkeypatch):
    monkeypatch.setenv("DASHBOARD_DASK_TIMEOUT", "1")
    address = f"tcp://127.0.0.1:{_free_loopback_port()}"
    local = map_trials(_slow_draw, range(3), seed=2, n_jobs=1)
    try:
        with use_scheduler(address), pytest.warns(ClusterUnavailable, match="runs on this machine"):
            fallback = map_trials(_slow_draw, range(3), seed=2)
        assert fallback == local
        with use_scheduler(address), pytest.warns(ClusterUnavailable):
            assert describe_backend(n_jobs=3) == "3 local cores"
    finally:
        forget_failures()


def test_a_scheduler_that_accepts_and_never_answers_falls_back_to_local(monkeypatch):
    """A port that takes the connection and stays silent (a wrong service, a hung scheduler) must not
    hang the fan-out: the connection attempt is abandoned at the timeout and the work runs here."""
    monkeypatch.setenv("DASHBOARD_DASK_TIMEOUT", "1")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                continue

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
    local = map_trials(_slow_draw, range(3), seed=4, n_jobs=1)
    box: dict = {}

    def fan_out() -> None:
        with use_scheduler(address), pytest.warns(ClusterUnavailable, match="no answer"):
            box["out"] = map_trials(_slow_draw, range(3), seed=4)

    worker = threading.Thread(target=fan_out, daemon=True)
    try:
        worker.start()
        worker.join(120)                      # a hang guard, not a speed check
        assert not worker.is_alive(), "map_trials hung on a silent scheduler"
        assert box["out"] == local
    finally:
        stop.set()
        acceptor.join(5)
        for conn in held:
            conn.close()
        silent.close()
        forget_failures()


def test_environment_variable_names_the_cluster_and_describes_it(cluster, monkeypatch):
    monkeypatch.setenv("DASHBOARD_DASK_SCHEDULER", cluster.scheduler_address)
    assert describe_backend() == f"Dask cluster {cluster.scheduler_address}: 2 workers"
    assert describe_backend(n_jobs=1) == "1 local core"           # a caller's in-process choice stands
    before = tasks_seen(cluster)
    assert map_trials(_slow_draw, range(3), seed=4, n_jobs=1) == map_trials(_slow_draw, range(3), seed=4,
                                                                           n_jobs=1, scheduler="local")
    assert tasks_seen(cluster) == before
    with use_scheduler("local"):
        assert describe_backend(n_jobs=3) == "3 local cores"
    assert Backend("dask", 1, "tcp://h:1").describe() == "Dask cluster tcp://h:1: 1 worker"


def test_nested_fan_out_runs_inside_the_task(cluster):
    local = map_trials(_nested, range(3), seed=9, n_jobs=1)
    with use_scheduler(cluster.scheduler_address):
        remote = map_trials(_nested, range(3), seed=9)
    assert [r[0] for r in remote] == [True] * 3
    assert [r[1] for r in remote] == [r[1] for r in local]


def test_an_item_error_reaches_the_caller_unchanged(cluster):
    with use_scheduler(cluster.scheduler_address), pytest.raises(ValueError, match="item 3 is bad"):
        map_trials(_fails, range(6))


def test_cancel_from_progress_cancels_outstanding_tasks(cluster):
    def stop(done, total, message):
        if done >= 1:
            raise Cancelled("stop")

    with use_scheduler(cluster.scheduler_address), pytest.raises(Cancelled):
        map_trials(_slow_draw, range(40), seed=1, progress=stop)
    def outstanding():
        return [k for k, ts in cluster.scheduler.tasks.items() if ts.state in ("waiting", "queued", "processing",
                                                                              "no-worker")]
    deadline = time.monotonic() + 30
    while outstanding() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not outstanding()                              # nothing left queued or running


def _progress_page():
    """A page that runs a fan-out behind the shared progress bar (AppTest runs this function's body)."""
    import streamlit as st

    from core.contracts import Cancelled
    from core.parallel import map_trials
    from dashboard.components.progress import progress_bar, where_work_runs

    st.caption(where_work_runs())
    try:
        with progress_bar("Squares", cancel_key="stop_squares") as progress:
            out = map_trials(lambda x: x * x, range(5), progress=progress, label="squares")
        st.write(f"sum {sum(out)}")
    except Cancelled:
        st.info("Stopped")


def _page_run(monkeypatch, scheduler: str | None):
    from streamlit.testing.v1 import AppTest

    if scheduler:
        monkeypatch.setenv("DASHBOARD_DASK_SCHEDULER", scheduler)
    else:
        monkeypatch.delenv("DASHBOARD_DASK_SCHEDULER", raising=False)
    at = AppTest.from_function(_progress_page, default_timeout=60)
    at.run()
    assert not at.exception
    return at


def test_progress_bar_says_where_the_work_runs_locally(monkeypatch):
    monkeypatch.setenv("DASHBOARD_N_JOBS", "2")
    at = _page_run(monkeypatch, None)
    assert at.caption[0].value == "Runs on 2 local cores"
    assert at.markdown[0].value == "sum 30" and not at.warning


def test_progress_bar_says_where_the_work_runs_on_the_cluster(cluster, monkeypatch):
    before = tasks_seen(cluster)
    at = _page_run(monkeypatch, cluster.scheduler_address)
    assert at.caption[0].value == f"Runs on Dask cluster {cluster.scheduler_address}: 2 workers"
    assert at.markdown[0].value == "sum 30" and not at.warning
    assert tasks_seen(cluster) > before


def test_progress_bar_warns_when_the_scheduler_is_away(monkeypatch):
    monkeypatch.setenv("DASHBOARD_DASK_TIMEOUT", "1")
    try:
        with pytest.warns(ClusterUnavailable):
            at = _page_run(monkeypatch, f"tcp://127.0.0.1:{_free_loopback_port()}")
        assert at.caption[0].value.endswith("local cores")
        assert "could not be reached" in at.warning[0].value
        assert at.markdown[0].value == "sum 30"
    finally:
        forget_failures()


def test_a_click_on_cancel_is_told_apart_from_other_reruns():
    from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

    from dashboard.components.progress import is_cancel_click

    def rerun(widget_id: str, clicked: bool) -> RerunException:
        states = WidgetStates(widgets=[WidgetState(id=widget_id, trigger_value=clicked)])
        return RerunException(RerunData(widget_states=states))

    assert is_cancel_click(rerun("$$ID-0123abcd-stop_squares", True), "stop_squares")
    assert not is_cancel_click(rerun("$$ID-0123abcd-stop_squares", False), "stop_squares")
    assert not is_cancel_click(rerun("$$ID-0123abcd-epsilon", True), "stop_squares")
    assert not is_cancel_click(KeyboardInterrupt(), "stop_squares")


# --------------------------------------------------------------------------------------------------
# One sweep per area on the cluster equals the same sweep run locally
# --------------------------------------------------------------------------------------------------

def assert_same_tables(local: dict, remote: dict) -> None:
    assert sorted(local) == sorted(remote)
    for name in local:
        pd.testing.assert_frame_equal(local[name], remote[name], check_exact=True, obj=name)


def on_cluster(cluster, fn):
    """``fn()`` with the fan-outs on the cluster; fails unless tasks really ran there."""
    before = tasks_seen(cluster)
    with use_scheduler(cluster.scheduler_address):
        out = fn()
    assert tasks_seen(cluster) > before, "nothing ran on the cluster"
    return out


def test_audit_trials_on_the_cluster_equal_the_local_run_and_share_its_cache(cluster, tmp_path, monkeypatch):
    from core.coherence import AdversaryChoice, AuditPlan, RowSample, run

    plan = AuditPlan(rows=RowSample(2000, 3), trials=6, lens=("age_band", "education", "sex"),
                     subgroup_columns=("sex", "race"), subgroup_order=1, gamma=60,
                     adversaries=(AdversaryChoice("naive_bayes"), AdversaryChoice("nearest_neighbour")))
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "local"))
    local = run(plan)
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cluster"))   # nothing cached: computed anew
    remote = on_cluster(cluster, lambda: run(plan))
    assert_same_tables(local.tables(), remote.tables())
    assert run.is_cached(plan)                               # the cluster's result answers the plan locally
    assert_same_tables(local.tables(), run(plan).tables())


def test_synthesis_sweep_on_the_cluster_equals_the_local_run(cluster):
    from core.contracts import DataRef
    from core.datasets import load_cps
    from core.synthesis.plan import SweepPlan, SynthesisPlan
    from core.synthesis.sweep import run_sweep

    frame = load_cps().sample(3000, random_state=0).reset_index(drop=True)
    plan = SynthesisPlan(data=DataRef("cps"), columns=("age_band", "education", "sex", "race", "income"),
                         strata=("sex", "race"), target="income",
                         sweep=SweepPlan(epsilons=(0.5, 2.0), seeds=(0, 1), n_trees=5))
    local = run_sweep(plan, frame, n_jobs=1)
    remote = on_cluster(cluster, lambda: run_sweep(plan, frame))
    for name in ("overall_metrics", "group_metrics", "strata", "ledger"):
        pd.testing.assert_frame_equal(getattr(local, name), getattr(remote, name), check_exact=True, obj=name)


def test_toydown_runs_on_the_cluster_equal_the_local_run(cluster, tmp_path, monkeypatch):
    from core.census import BudgetPlan, run

    # above 200,000 leaves the budget tool ships its ToyDown runs; smaller trees stay in-process
    plan = BudgetPlan(fanouts=(45, 50, 90), runs=3, algorithms=None, mechanisms=None, public=None)
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "local"))
    local = run(plan)
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cluster"))
    remote = on_cluster(cluster, lambda: run(plan))
    assert_same_tables(local.tables(), remote.tables())


def test_a_scheduler_lost_mid_run_leaves_the_rest_to_this_machine(monkeypatch):
    monkeypatch.setenv("DASHBOARD_DASK_TIMEOUT", "1")
    local = map_trials(_slow_draw, range(12), seed=8, n_jobs=1)
    doomed = loopback_cluster(1)             # its own: this test closes the scheduler
    address = doomed.scheduler_address

    def close_early(done, total, message):
        if done >= 2 and doomed.status.name == "running":
            doomed.close()

    try:
        with use_scheduler(address), pytest.warns(ClusterUnavailable, match="Lost the Dask scheduler"):
            remote = map_trials(_slow_draw, range(12), seed=8, progress=close_early)
        assert remote == local
    finally:
        doomed.close()
        forget_failures()


def test_frontier_points_on_the_cluster_equal_the_local_run(cluster, tmp_path, monkeypatch):
    from core.fairness.frontier import FrontierPlan, trade_off_frontier

    rng = np.random.default_rng(0)
    i, j = rng.integers(0, 7214, 200), rng.integers(0, 7214, 200)
    keep = i != j
    pairs = pd.DataFrame({"i": np.minimum(i, j)[keep], "j": np.maximum(i, j)[keep], "weight": 1.0,
                          "n_judges": 2, "agreement": 0.75})
    plan = FrontierPlan(gammas=(0.0, 0.3, 1.0), T=60, oracle="ols", averaging="paper")
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "local"))
    local = trade_off_frontier(pairs, plan)
    monkeypatch.setenv("DASHBOARD_CACHE_DIR", str(tmp_path / "cluster"))
    remote = on_cluster(cluster, lambda: trade_off_frontier(pairs, plan))
    for name in ("points", "pairs", "groups", "trajectories"):
        pd.testing.assert_frame_equal(getattr(local, name), getattr(remote, name), check_exact=True, obj=name)
    np.testing.assert_array_equal(local.p_hat, remote.p_hat)


def _recom_chain(index: int, rng: np.random.Generator, adj, population: np.ndarray) -> np.ndarray:
    from core.districts.plans import recom_ensemble

    return recom_ensemble(adj, population, 4, 0.1, steps=20, thin=10, seed=int(rng.integers(2**31)),
                          use_cache=False)


def test_recom_ensemble_chains_on_the_cluster_equal_the_local_run(cluster):
    # the district tool runs one chain per plan; an ensemble of independent chains fans out like this
    from core.geography.adjacency import unit_adjacency
    from core.geography.grid import synthetic_grid

    geo = synthetic_grid((16, 4, 4), seed=2)
    chain = functools.partial(_recom_chain, adj=unit_adjacency(geo, "block group"),
                              population=geo.units("block group")["total"].to_numpy())
    local = map_trials(chain, range(4), seed=21, n_jobs=1)
    remote = on_cluster(cluster, lambda: map_trials(chain, range(4), seed=21))
    for a, b in zip(local, remote, strict=True):
        np.testing.assert_array_equal(a, b)
    assert any((a != local[0]).any() for a in local[1:])      # the chains are not copies of one another
