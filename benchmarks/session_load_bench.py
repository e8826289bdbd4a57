"""Load of a live elicitation session: stakeholders answering cards on one dashboard server.

Run from the repository root: `python benchmarks/session_load_bench.py [--stakeholders 30] [--cards 52]
[--no-sweep] [--scheduler tcp://host:8786 | --local-cluster]`.

It starts the dashboard as `make run` does (`streamlit run dashboard/app.py`, headless, on a free
loopback port) with a temporary session database (DASHBOARD_DB_URL) and cache folder, creates a
session through the store (as the facilitator's Create button does), and then drives real Streamlit
sessions with light websocket clients (tests/streamlit_ws_client.py, Streamlit's own protocol;
no browser):

- each stakeholder opens the join link (`?join=CODE` on the elicitation page), types a name, ticks
  the consent box, presses Join, and answers every card at a human pace (2-6 s think time, one
  seeded stream per stakeholder);
- the facilitator opens the session with its code and key and presses "Refresh now" every 5 s;
- unless `--no-sweep`, a curator's session on the stratified synthesis page picks GEM, ticks "Start
  anyway" and presses Run sweep (the page's own run, which it hands to its background job process)
  before the room is given the code, and follows its progress while the room answers.

Measured: answers acknowledged (the run after the click finished and the page counted the answer)
and stored (answer events in the store at the end), answer latency (click sent -> script_finished),
join time (link opened -> join form drawn, plus Join pressed -> first card drawn; the typing pause
between the two is not counted), the facilitator's refresh latency, and the machine's load average
(os.getloadavg, the 1-minute figure at the end). Targets (issue text): every answer stored, join
within 10 s, answer p95 under 1 s, refresh p95 under 3 s while the sweep runs.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tests import dashboard_process  # noqa: E402
from tests.streamlit_ws_client import FINISHED_OK, StreamlitSession  # noqa: E402
from timing import record  # noqa: E402

PAGE = "fairness-elicitation"
SWEEP_PAGE = "stratified-synthesis"
P = "fe_"
THINK = (2.0, 6.0)          # seconds a person reads a card before answering
REFRESH_EVERY = 5.0         # seconds between the facilitator's refreshes


@contextmanager
def dashboard(folder: Path, profile: str | None = None, **env: str) -> Iterator[str]:
    """`make run`'s command on a free loopback port, with `env` added; yields the URL. The
    server's output goes to folder/server.log. `profile`: a file for the summed cProfile of every
    script run (benchmarks/profiled_streamlit.py)."""
    launcher = None
    if profile:
        launcher = [str(ROOT / "benchmarks" / "profiled_streamlit.py")]
        env["PROFILE_OUT"] = str(Path(profile).resolve())
    with dashboard_process.dashboard(folder, launcher, **env) as url:
        yield url


@contextmanager
def local_cluster() -> Iterator[str]:
    """A two-worker Dask LocalCluster on loopback; yields its scheduler address."""
    from dask.distributed import LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                           processes=True)
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


def design(cards: int):
    """The session design: the page's defaults with `cards` cards per stakeholder (10 core pairs
    and 2 repeats when there are at least 12 cards, the rest random pairs)."""
    from core.fairness import ElicitationPlan
    if cards < 1:
        raise ValueError("--cards must be at least 1.")
    core, repeat = (10, 2) if cards >= 12 else (cards, 0)
    return ElicitationPlan(n_core=core, n_random=cards - core - repeat, n_repeat=repeat)


# ---------------------------------------------------------------------------------- clients

@dataclass
class Tally:
    answers: list[float] = field(default_factory=list)     # seconds, click -> script_finished
    acknowledged: int = 0
    joins: list[float] = field(default_factory=list)
    refreshes: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    sweep: str = "not run"


def answered_count(page: StreamlitSession) -> int | None:
    """The '<k> of <n> cards answered' count the stakeholder's page shows (None if absent)."""
    for text in page.texts():
        if text.endswith("cards answered"):
            return int(text.split(" of ")[0])
    return None


async def stakeholder(url: str, code: str, k: int, cards: int, seed: int, tally: Tally, arrive: float,
                      think: tuple[float, float] = THINK) -> None:
    rng = np.random.default_rng([seed, k])
    await asyncio.sleep(arrive)
    page = StreamlitSession(url, PAGE, f"join={code}")
    try:
        t0 = time.perf_counter()
        await page.open()
        first = await page.run()
        opened = time.perf_counter() - t0
        if page.widget("button", P + "join") is None:
            raise RuntimeError(f"no join form ({first.errors or page.texts()[:3]})")
        page.set_value("text_input", P + "join_name", string_value=f"person {k:02d}")
        page.set_value("checkbox", P + "consent", bool_value=True)
        await asyncio.sleep(float(rng.uniform(*think)))            # typing a name: not counted
        joined = await page.click(P + "join")
        if answered_count(page) is None:
            raise RuntimeError(f"Join did not open the cards ({joined.errors or page.texts()[:4]})")
        tally.joins.append(opened + joined.seconds)
        for position in range(cards):
            await asyncio.sleep(float(rng.uniform(*think)))
            options = [b.id.rsplit("-", 1)[-1] for b in page.widgets("button")
                       if b.id.rsplit("-", 1)[-1].startswith(P + "ans_")]
            if not options:
                raise RuntimeError(f"card {position + 1}: no answer buttons ({page.texts()[:4]})")
            before = answered_count(page)
            outcome = await page.click(options[int(rng.integers(len(options)))])
            tally.answers.append(outcome.seconds)
            if outcome.status in FINISHED_OK and answered_count(page) == before + 1:
                tally.acknowledged += 1
            else:
                tally.failures.append(f"stakeholder {k} card {position + 1}: {outcome.errors or page.texts()[:3]}")
    except Exception as err:  # noqa: BLE001 - one stakeholder's failure is a finding, not a crash
        tally.failures.append(f"stakeholder {k}: {type(err).__name__}: {err}")
    finally:
        await page.close()


async def facilitator(url: str, code: str, key: str, tally: Tally, stop: asyncio.Event,
                      ready: asyncio.Event) -> None:
    page = StreamlitSession(url, PAGE)
    try:
        await page.open()
        await page.run()
        page.set_value("text_input", P + "open_code", string_value=code)
        page.set_value("text_input", P + "open_key", string_value=key)
        opened = await page.click(P + "open")
        if page.widget("button", P + "refresh") is None:
            raise RuntimeError(f"the session did not open ({opened.errors or page.texts()[:4]})")
        ready.set()
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), REFRESH_EVERY)
            except asyncio.TimeoutError:
                outcome = await page.click(P + "refresh")
                tally.refreshes.append(outcome.seconds)
    except Exception as err:  # noqa: BLE001
        tally.failures.append(f"facilitator: {type(err).__name__}: {err}")
    finally:
        await page.close()


async def curator(url: str, tally: Tally, started: asyncio.Event) -> None:
    """The stratified synthesis page with GEM chosen and Run sweep pressed; the run is left going."""
    page = StreamlitSession(url, SWEEP_PAGE, follow_auto_rerun=True)   # the page polls its job like a browser
    try:
        await page.open()
        await page.run()
        box = next((w for w in page.widgets("selectbox") if w.id.endswith("synthesizer")), None)
        gem = [o for o in box.options if "GEM" in o] if box is not None else []
        if not gem:
            raise RuntimeError("no GEM choice on the stratified synthesis page")
        page.set_value("selectbox", box.id.rsplit("-", 1)[-1], string_value=gem[0])
        await page.run()
        # a run predicted to be long waits for its "Start anyway" tick
        for tick in page.widgets("checkbox"):
            if tick.label == "Start anyway":
                page.set_value("checkbox", tick.id.rsplit("-", 1)[-1], bool_value=True)
                await page.run()
        estimate = next((t for t in page.texts() if "fits" in t and "minutes" in t), "")
        # The click's run lasts as long as the sweep (the page follows its job): the sweep counts as
        # started once the page shows its progress.
        t0, runs = time.perf_counter(), page.runs
        finished = await page.send((page.button_id("ss_run"),))
        while not finished.done() and not (page.runs > runs and any(
                t.startswith("Computing") and "(0/0)" not in t for t in page.texts())):
            if time.perf_counter() - t0 > 600:
                raise TimeoutError("the sweep showed no progress within 600 s")
            await asyncio.sleep(0.5)
        tally.sweep = (f"started ({estimate.split(':')[0] or 'no estimate shown'}; progress shown after "
                       f"{time.perf_counter() - t0:.1f} s)")
        started.set()
        await finished                          # the curator watches the page until the room is done
        tally.sweep += f", finished after {time.perf_counter() - t0:.0f} s"
    except asyncio.CancelledError:
        tally.sweep += f"; {page.auto_reruns} timed reruns of its progress"
        raise
    except Exception as err:  # noqa: BLE001
        tally.sweep = f"failed: {type(err).__name__}: {err}"
    finally:
        await page.close()


async def drive(url: str, code: str, key: str, args, tally: Tally) -> None:
    stop, ready = asyncio.Event(), asyncio.Event()
    # The facilitator has the session open before the room is given the code (this also means the
    # server has drawn the page once, as it has in a real workshop).
    fac = asyncio.create_task(facilitator(url, code, key, tally, stop, ready))
    await asyncio.wait([fac, asyncio.create_task(ready.wait())], return_when=asyncio.FIRST_COMPLETED)
    sweep = None
    if args.sweep:                   # the curator's sweep is computing when the room joins
        started = asyncio.Event()
        sweep = asyncio.create_task(curator(url, tally, started))
        await asyncio.wait([sweep, asyncio.create_task(started.wait())], return_when=asyncio.FIRST_COMPLETED)
        await asyncio.sleep(args.sweep_lead)
    arrivals = np.random.default_rng(args.seed).uniform(0, args.arrival, size=args.stakeholders)
    await asyncio.gather(*(stakeholder(url, code, k, args.cards, args.seed, tally, float(arrivals[k]),
                                       tuple(args.think))
                           for k in range(args.stakeholders)))
    stop.set()
    await fac
    if sweep is not None:
        sweep.cancel()
        await asyncio.gather(sweep, return_exceptions=True)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values) * 1000, q)) if values else float("nan")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stakeholders", type=int, default=30)
    parser.add_argument("--cards", type=int, default=52, help="cards per stakeholder (the page's default: 52)")
    parser.add_argument("--no-sweep", dest="sweep", action="store_false",
                        help="no curator running a GEM sweep on the stratified synthesis page")
    parser.add_argument("--scheduler", default=None, help="run the server with DASHBOARD_DASK_SCHEDULER=this")
    parser.add_argument("--local-cluster", action="store_true",
                        help="start a two-worker Dask LocalCluster on loopback and use it as the scheduler")
    parser.add_argument("--arrival", type=float, default=10.0, help="stakeholders open the link within this many s")
    parser.add_argument("--sweep-lead", type=float, default=5.0, help="s the sweep runs before the room joins")
    parser.add_argument("--think", type=float, nargs=2, default=THINK, metavar=("LOW", "HIGH"),
                        help="think time per card, uniform between LOW and HIGH s (default 2 6)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--profile", default=None, metavar="FILE",
                        help="write the summed cProfile of the server's script runs to FILE (pstats)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (server.log)")
    args = parser.parse_args(argv)
    if args.stakeholders < 1:
        parser.error("--stakeholders must be at least 1")
    if args.scheduler and args.local_cluster:
        parser.error("give --scheduler or --local-cluster, not both")

    from core.fairness.store import ElicitationStore

    folder = Path(tempfile.mkdtemp(prefix="session_load_"))
    db_url = f"sqlite:///{folder / 'sessions.db'}"
    env = {"DASHBOARD_DB_URL": db_url, "DASHBOARD_CACHE_DIR": str(folder / "cache")}
    tally = Tally()
    try:
        with (local_cluster() if args.local_cluster else _nothing(args.scheduler)) as scheduler:
            if scheduler:
                env["DASHBOARD_DASK_SCHEDULER"] = scheduler
            store = ElicitationStore(db_url)
            created = store.create_session(design(args.cards), "Load test")
            with dashboard(folder, args.profile, **env) as url:
                t0 = time.perf_counter()
                asyncio.run(drive(url, created.join_code, created.facilitator_key, args, tally))
                wall = time.perf_counter() - t0
                load = os.getloadavg()
            stored = len(store.event_log(created.session_id, created.facilitator_key))
            store.dispose()
    finally:
        if args.keep:
            print(f"kept {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)

    expected = args.stakeholders * args.cards
    where = f"Dask scheduler {scheduler}" if scheduler else "local workers"
    print(f"clients: Streamlit websocket (light); {args.stakeholders} stakeholders x {args.cards} cards, "
          f"think {args.think[0]:g}-{args.think[1]:g} s; facilitator refresh every {REFRESH_EVERY:g} s; "
          f"sweep: {'GEM on the stratified synthesis page, ' + tally.sweep if args.sweep else 'none'}; "
          f"batch work on {where}; wall {wall:.0f} s")
    print(f"answers: acknowledged {tally.acknowledged}/{expected}, stored {stored}/{expected}")
    print(f"answer latency: p50 {pct(tally.answers, 50):.0f} ms, p95 {pct(tally.answers, 95):.0f} ms, "
          f"max {pct(tally.answers, 100):.0f} ms ({len(tally.answers)} clicks)")
    print(f"join (link -> form, Join -> first card): p50 {pct(tally.joins, 50) / 1000:.1f} s, "
          f"max {pct(tally.joins, 100) / 1000:.1f} s ({len(tally.joins)}/{args.stakeholders} in)")
    print(f"facilitator refresh: p50 {pct(tally.refreshes, 50):.0f} ms, p95 {pct(tally.refreshes, 95):.0f} ms, "
          f"max {pct(tally.refreshes, 100):.0f} ms ({len(tally.refreshes)} refreshes)")
    print(f"machine load (1, 5, 15 min): {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f} on {os.cpu_count()} cores")
    for failure in tally.failures[:10]:
        print("  failure:", failure)
    if len(tally.failures) > 10:
        print(f"  ... and {len(tally.failures) - 10} more failures")
    print(f"session load: stored {stored}/{expected} answers; answer p95 {pct(tally.answers, 95):.0f} ms; "
          f"refresh p95 {pct(tally.refreshes, 95):.0f} ms; load {load[0]:.1f}")
    return {"stored": stored, "expected": expected, "acknowledged": tally.acknowledged,
            "failures": tally.failures, "joins": tally.joins, "answers": tally.answers,
            "refreshes": tally.refreshes, "load": load[0], "people": args.stakeholders, "cards": args.cards}


@contextmanager
def _nothing(value):
    yield value


if __name__ == "__main__":
    out = main()
    record(f"Live session, {out['people']} stakeholders x {out['cards']} cards: answer latency p95, one session",
           pct(out["answers"], 95), unit="ms", clock="wall", load=out["load"])
