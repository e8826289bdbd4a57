"""Code people keep: every page's report exported as a script and a notebook that recompute its tables.

For each page a small plan is run through core and saved as a report; ``python -m core script`` writes
the script and the notebook. Each script runs in its own process: one page's as the plain command
``python reproduce.py``, the others in children forked from a runner that imported the third-party libraries
once (the project's own modules are imported by each script). The notebooks run with nbclient in one
ipykernel kernel, its namespace emptied (``%reset -f``) before each. Every run
has its own empty folder, the repository on the path, a result cache the report's run never filled (so
nothing is answered from it) and a guard that refuses any connection leaving the machine. The CSV tables
they write are compared with the report's tables cell by cell: text must be identical and numbers equal
(CSV keeps every bit of a float, so no tolerance is used).
"""
from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from core.__main__ import main as cli
from core.contracts import DataRef, bytes_fingerprint
from core.report import build_report, guarded_csv, report_json, table_from_records
from core.sharing import CONFIDENTIAL
from core.script_export import DIGEST_PREFIX, FIGURE_FILE, OUT_DIR, notebook_json, plan_source, script_text

pytestmark = pytest.mark.slow   # processes, clusters, servers or notebooks: left out of make test-quick

REPO = Path(__file__).resolve().parents[2]

# A sitecustomize that refuses every connection and name lookup beyond loopback, for the child processes.
NETWORK_GUARD = textwrap.dedent('''
    import socket
    _LOOP = ("", "None", "localhost", "127.0.0.1", "::1", "0.0.0.0")
    def _check(address):
        if isinstance(address, tuple) and not (str(address[0]) in _LOOP or str(address[0]).startswith("127.")):
            raise OSError(f"network blocked: {address!r}")
    _connect, _lookup = socket.socket.connect, socket.getaddrinfo
    def _guarded_connect(self, address, *a, **k):
        _check(address)
        return _connect(self, address, *a, **k)
    def _guarded_lookup(host, *a, **k):
        _check((host,))
        return _lookup(host, *a, **k)
    socket.socket.connect = _guarded_connect
    socket.getaddrinfo = _guarded_lookup
''')


# Runs several exported scripts, each in its own forked child process with ``__main__`` semantics (its
# folder as working directory and first path entry, its own result cache, its output in its log), after
# importing once the third-party libraries every script imports, so each child spends no time importing
# them again. The project's own modules (core, dashboard) are imported by each script itself.
SCRIPT_RUNNER = textwrap.dedent('''
    import json, os, runpy, sys, traceback
    import geopandas, numpy, pandas, plotly.express, plotly.graph_objects, scipy.optimize, scipy.stats, sklearn
    children = []
    for script, work, cache, log in json.loads(sys.argv[1]):
        sys.stdout.flush(); sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.chdir(work)
            os.environ["DASHBOARD_CACHE_DIR"] = cache
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1); os.dup2(fd, 2)
            sys.argv, sys.path[0] = [script], os.path.dirname(script)
            code = 0
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(code)
        children.append(pid)
    print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]))
''')
# One page's script also runs as the plain command an analyst types, in a fresh interpreter.
PLAIN_COMMAND_PAGE = "Budget allocation"


# ------------------------------------------------------------------------------------------- the pages
def _budget():
    from core.census import BudgetPlan, run
    return run(BudgetPlan(runs=4)), None


def _coherence():
    from core.coherence import AdversaryChoice, AuditPlan, RowSample, run
    return run(AuditPlan(rows=RowSample(600, 0), trials=2, adversaries=(AdversaryChoice("naive_bayes"),))), None


def _coherence_upload():
    from core.coherence import AdversaryChoice, AuditPlan, RowSample, load_frame, run
    raw = load_frame(DataRef("cps")).head(500).to_csv(index=False).encode()
    plan = AuditPlan(data=DataRef("upload", bytes_fingerprint(raw)), rows=RowSample(None, 0), trials=2,
                     lens=("age_band", "education", "sex"), subgroup_columns=("sex",), subgroup_order=1,
                     gamma=40, adversaries=(AdversaryChoice("naive_bayes"),))
    return run(plan, raw), raw


def _districts():
    from core.districts import DistrictPlan, GreedyParams, run
    plan = DistrictPlan(generator="greedy", params=GreedyParams(n_plans=2))
    return run(plan.replace(noise=plan.noise.replace(runs=4))), None


def _synthesis():
    # The marginals tab (not the utility sweep, whose random forests would take most of the test's time).
    from core.synthesis import MarginalsPlan, SynthesisPlan, run
    return run(SynthesisPlan(data=DataRef("cps"), columns=("sex", "race", "income"), strata=("sex",),
                             sweep=None, marginals=MarginalsPlan(epsilon=2.0, seed=3), means=None)), None


def _group_fairness():
    from core.fairness import GroupFairnessPlan, LexifairPlan, run_group_fairness
    return run_group_fairness(GroupFairnessPlan(max_rows=2000, lexifair=LexifairPlan(rounds=20, levels=2,
                                                                                     bootstrap=20),
                                                ranking=None, companion=None)), None


def _elicitation():
    from core.fairness import ElicitationPlan, run_elicitation
    return run_elicitation(ElicitationPlan(demo_stakeholders=3, n_random=6)), None


def _elicitation_synthetic(db_url: str):
    """A design whose cards show a released synthetic copy kept in the project database (the database the
    exported code reads); the pair_epsilon the copy was released with rides in the plan."""
    from core.fairness import ElicitationPlan, run_elicitation
    from core.fairness.private_pairs import PrivatePairsPlan, release_synthetic_people
    from core.fairness.store import ElicitationStore
    made = release_synthetic_people(PrivatePairsPlan(population="paper", epsilon=0.9))
    store = ElicitationStore(db_url)
    store.save_copy(made)
    store.dispose()
    plan = ElicitationPlan(pair_source="dp_synthetic", pair_epsilon=0.9, pair_copy=made.copy_id, n_random=6)
    return run_elicitation(plan, made), None


# The variants check the data step's other paths (an uploaded file, a copy kept in the project database);
# their notebooks would repeat the same code.
SCRIPT_ONLY = {"Coherence audit (uploaded file)", "Fairness elicitation (synthetic copy)"}

PAGES = {"Budget allocation": _budget, "Coherence audit": _coherence,
         "Coherence audit (uploaded file)": _coherence_upload, "District maps": _districts,
         "Stratified synthesis": _synthesis, "Group fairness and ranking": _group_fairness,
         "Fairness elicitation": _elicitation, "Fairness elicitation (synthetic copy)": _elicitation_synthetic}


@pytest.fixture(scope="module")
def child_env(tmp_path_factory):
    """Environment of the processes that run the exported code: the repository and the network guard on
    the path, an empty result cache, a private database, one worker."""
    guard = tmp_path_factory.mktemp("guard")
    (guard / "sitecustomize.py").write_text(NETWORK_GUARD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(guard)]), DASHBOARD_N_JOBS="1",
               DASHBOARD_CACHE_DIR=str(tmp_path_factory.mktemp("child_cache")),
               DASHBOARD_DB_URL=f"sqlite:///{tmp_path_factory.mktemp('db') / 'project.db'}",
               PYTHONDONTWRITEBYTECODE="1")
    return env


@pytest.fixture(scope="module")
def exported(tmp_path_factory, child_env):
    """For each page: (report, folder holding report.json, reproduce.py, reproduce.ipynb and any data file)."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DASHBOARD_N_JOBS", "1")
        for page, make in PAGES.items():
            result, raw = make(child_env["DASHBOARD_DB_URL"]) if make is _elicitation_synthetic else make()
            # the curator's rerun holds every table, so it is checked against the confidential report (the
            # shared one's code is the same: it is written from the plan alone)
            report = json.loads(report_json(build_report(result, page=page, audience=CONFIDENTIAL)))
            shared = {**build_report(result, page=page), "created_utc": report["created_utc"]}
            assert script_text(shared) == script_text(report)
            folder = tmp_path_factory.mktemp("page")
            (folder / "report.json").write_text(report_json(report))
            args = ["script", str(folder / "report.json"), "--out", str(folder / "reproduce.py"),
                    "--notebook", str(folder / "reproduce.ipynb")]
            if raw is not None:
                (folder / "my_upload.csv").write_bytes(raw)
                args += ["--data", "my_upload.csv"]
            assert cli(args) == 0
            out[page] = (report, folder)
    yield out




def _cells(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)


def _same_cell(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return x == y or (x != x and y != y)


def table_differences(report: dict, folder: Path) -> list[str]:
    """What differs between the report's tables and the CSVs in ``folder`` (empty when all agree)."""
    saved = report["tables"]
    written = {p.stem: p for p in folder.glob("*.csv")}
    problems = [f"missing table {n}" for n in sorted(set(saved) - set(written))]
    problems += [f"extra table {n}" for n in sorted(set(written) - set(saved))]
    for name in sorted(set(saved) & set(written)):
        want = _cells(guarded_csv(table_from_records(saved[name])))
        got = _cells(written[name].read_text())
        if list(want.columns) != list(got.columns) or want.shape != got.shape:
            problems.append(f"{name}: shape or columns differ ({want.shape} vs {got.shape})")
            continue
        bad = [(r, c) for c in want.columns for r in range(len(want))
               if not _same_cell(want[c].iat[r], got[c].iat[r])]
        if bad:
            r, c = bad[0]
            problems.append(f"{name}: {len(bad)} cells differ, first row {r} column {c!r}: "
                            f"{want[c].iat[r]!r} vs {got[c].iat[r]!r}")
    return problems


def _run_folder(folder: Path, name: str) -> Path:
    """A fresh, empty working folder for one run, holding only the data file the code reads."""
    work = folder / name
    work.mkdir()
    upload = folder / "my_upload.csv"
    if upload.exists():
        (work / upload.name).write_bytes(upload.read_bytes())
    return work


def _start_scripts(exported: dict, env: dict) -> tuple[list[subprocess.Popen], dict]:
    """Start every page's script in a fresh folder with its own empty result cache (output in output.txt):
    :data:`PLAIN_COMMAND_PAGE`'s as ``python reproduce.py``, the others through :data:`SCRIPT_RUNNER`.
    Gives the processes and, per page, (the process that reports its exit code, folder)."""
    jobs, where, processes, plain = [], {}, [], None
    for page, (_, folder) in exported.items():
        work = _run_folder(folder, "script_run")
        where[page] = work
        if page == PLAIN_COMMAND_PAGE:
            with open(work / "output.txt", "w") as log:
                plain = subprocess.Popen([sys.executable, str(folder / "reproduce.py")], cwd=work,
                                         env={**env, "DASHBOARD_CACHE_DIR": str(work / ".cache")},
                                         stdout=log, stderr=subprocess.STDOUT)
            processes.append(plain)
        else:
            jobs.append([str(folder / "reproduce.py"), str(work), str(work / ".cache"), str(work / "output.txt")])
    runner = subprocess.Popen([sys.executable, "-c", SCRIPT_RUNNER, json.dumps(jobs)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    processes.append(runner)
    started = {page: (plain if page == PLAIN_COMMAND_PAGE else runner, work) for page, work in where.items()}
    return processes, {"jobs": [job[1] for job in jobs], "started": started, "runner": runner, "plain": plain}


def _run_notebooks(exported: dict, env: dict, tmp: Path) -> dict:
    """Execute every page's notebook with nbclient in one ipykernel kernel of this Python (started once, to
    spare a kernel start per page): before each notebook the kernel's namespace is emptied (``%reset -f``)
    and its folder changed to a fresh one, so each notebook runs on its own imports and writes its own
    files. Gives (0 or 1, what the cells printed or the error, folder) per page."""
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    from nbformat.v4 import new_code_cell, new_notebook

    kernel = KernelManager(kernel_name="python3")
    kernel.start_kernel(env={**env, "DASHBOARD_CACHE_DIR": str(tmp / "kernel_cache")}, cwd=str(tmp))
    out = {}
    try:
        for page, (_, folder) in exported.items():
            if page in SCRIPT_ONLY:
                continue
            work = _run_folder(folder, "notebook_run")
            book = nbformat.read(folder / "reproduce.ipynb", as_version=4)
            fresh = new_notebook(cells=[new_code_cell(f"%reset -f\nimport os as _os\n_os.chdir({str(work)!r})\n"
                                                      "del _os")])
            try:
                for notebook in (fresh, book):
                    client = NotebookClient(notebook, km=kernel, timeout=600, kernel_name="python3")
                    client.execute()
                    client.kc.stop_channels()
            except CellExecutionError as exc:
                out[page] = (1, str(exc), work)
                continue
            printed = "".join(o.get("text", "") for cell in book.cells if cell.cell_type == "code"
                              for o in cell.get("outputs", []))
            out[page] = (0, printed, work)
    finally:
        kernel.shutdown_kernel(now=True)
    return out


@pytest.fixture(scope="module")
def runs(exported, child_env, tmp_path_factory):
    """Every page's finished runs: (exit code, what it printed, its folder) by (page, "script" | "notebook").
    The scripts run in their own processes while the notebooks run one after another in the kernel."""
    processes, scripts = _start_scripts(exported, child_env)
    try:
        notebooks = _run_notebooks(exported, child_env, tmp_path_factory.mktemp("kernel"))
        out = {(page, "notebook"): value for page, value in notebooks.items()}
        printed, errors = scripts["runner"].communicate(timeout=900)
        assert scripts["runner"].returncode == 0, errors[-3000:]
        codes = dict(zip(scripts["jobs"], json.loads(printed.strip().splitlines()[-1])))
        plain_code = scripts["plain"].wait(timeout=900)
        for page, (_, work) in scripts["started"].items():
            code = plain_code if page == PLAIN_COMMAND_PAGE else codes[str(work)]
            out[page, "script"] = (code, (work / "output.txt").read_text(), work)
    finally:
        for process in processes:                # a run a failed fixture left behind does not outlive it
            if process.poll() is None:
                process.kill()
    return out


# ------------------------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("page,kind", [(page, kind) for page in PAGES for kind in ("script", "notebook")
                                       if kind == "script" or page not in SCRIPT_ONLY])
def test_exported_code_recomputes_the_reports_tables(exported, runs, page, kind):
    report = exported[page][0]
    code, printed, work = runs[page, kind]
    assert code == 0, printed[-3000:]
    assert f"{DIGEST_PREFIX} {report['plan_digest']}" in printed
    assert table_differences(report, work / OUT_DIR) == []
    figure = (work / OUT_DIR / FIGURE_FILE).read_text()
    assert "Plotly.newPlot" in figure and '<script src="http' not in figure    # drawn; plotly.js inside


def test_notebook_explains_each_step_before_its_code(exported):
    book = nbformat.reads((exported["Budget allocation"][1] / "reproduce.ipynb").read_text(), as_version=4)
    kinds = [cell.cell_type for cell in book.cells]
    assert kinds == ["markdown", "code"] * (len(kinds) // 2)
    titles = [cell.source.splitlines()[0] for cell in book.cells if cell.cell_type == "markdown"]
    assert titles[:4] == ["# What this does", "## 1. The plan", "## 2. The data", "## 3. The run"]
    assert book.metadata.kernelspec.name == "python3"


def test_the_plan_is_readable_python_one_keyword_per_line_with_nested_params():
    from core.coherence import AdversaryChoice, AuditPlan, ReleaseChoice
    from core.coherence.adversaries import NearestNeighbourParams
    plan = AuditPlan(adversaries=(AdversaryChoice("nearest_neighbour", NearestNeighbourParams(tau=0.5)),),
                     releases=(ReleaseChoice("clear_half"),))
    code, imports = plan_source(plan)
    tree = ast.parse(code)                                  # valid Python, one assignment of a call
    call = tree.body[0].value
    assert isinstance(call, ast.Call) and call.func.id == "AuditPlan" and not call.args
    assert [k.arg for k in call.keywords][:3] == ["data", "rows", "target"]
    assert "\n    target='income',  # " in code and "\n    alpha=0.4,  # " in code     # one per line, labelled
    assert "NearestNeighbourParams(\n" in code and "tau=0.5,  # " in code and "{" not in code   # no JSON blob
    assert any(line.startswith("from core.coherence import") and "AuditPlan" in line for line in imports)
    namespace: dict = {}
    for line in imports:
        module, names = line[5:].split(" import ")
        package = __import__(module, fromlist=names.split(", "))
        namespace.update({n: getattr(package, n) for n in names.split(", ")})
    rebuilt = _assign(code, namespace)
    assert rebuilt == plan and rebuilt.digest() == plan.digest()


def _assign(code: str, namespace: dict):
    """Build the plan the exported code writes, by evaluating its literal tree (names from ``namespace``)."""
    def value(node):
        if isinstance(node, ast.Call):
            return namespace[node.func.id](*[value(a) for a in node.args],
                                           **{k.arg: value(k.value) for k in node.keywords})
        if isinstance(node, ast.Tuple):
            return tuple(value(e) for e in node.elts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        return ast.literal_eval(node)
    return value(ast.parse(code).body[0].value)


def test_non_finite_numbers_and_single_items_are_written_as_python():
    from core.census import BudgetPlan
    code, _ = plan_source(BudgetPlan(targets=("leaf",)))
    assert "targets=('leaf',)," in code
    from core.script_export import _Imports, _literal
    assert _literal(float("inf"), _Imports(), 0) == 'float("inf")'
    assert _literal((1.5, -2.0), _Imports(), 0) == "(1.5, -2.0)"
    long = "Say whether  the two people should get the same prediction; keep it neutral, short and plain. " * 2
    written = _literal(long, _Imports(), 4)
    assert written.count("\n") > 2 and ast.literal_eval(written) == long      # split over lines, same text


def test_a_declared_data_set_is_loaded_by_name_and_path_with_its_fingerprint(exported):
    from core.contracts import plan_to_dict
    from core.intake import ColumnSchema, DataSchema
    from core.report import load_plan
    report = exported["Coherence audit (uploaded file)"][0]
    schema = DataSchema("County extract", (ColumnSchema("sex", "category", categories=("F", "M")),))
    fingerprint = report["plan"]["data"]["fingerprint"]
    plan = load_plan(report).replace(data=DataRef("upload", fingerprint, schema=schema))
    declared = {**report, "plan": plan_to_dict(plan), "plan_digest": plan.digest()}
    text = script_text(declared)
    assert "declared data set 'County extract'" in _words(text)
    assert "DATA_FILES = [Path('County extract.csv')]" in text
    assert fingerprint in text and "check_upload(plan" in text
    assert "DataSchema(\n" in text and "ColumnSchema(" in text      # the declaration, written out
    assert "DATA_FILES = [Path('extract.csv')]" in script_text(declared, data_files=("extract.csv",))
    ast.parse(text)


def _words(text: str) -> str:
    """The text with comment marks dropped and every run of white space made one space (lines wrap)."""
    return " ".join(text.replace("#", " ").split())


def test_elicitation_script_says_what_it_does_not_recompute(exported):
    text = (exported["Fairness elicitation"][1] / "reproduce.py").read_text()
    assert "Export session (CSV)" in _words(text) and "answers of real stakeholders" in _words(text)
    assert "stored_data" not in text                        # real records: nothing from the database
    copy = (exported["Fairness elicitation (synthetic copy)"][1] / "reproduce.py").read_text()
    assert "data = stored_data(plan)" in copy and "from core.fairness import ElicitationPlan, run, stored_data" in copy


def test_command_prints_the_script_without_out_and_refuses_a_non_report(exported, tmp_path, capsys):
    folder = exported["District maps"][1]
    assert cli(["script", str(folder / "report.json")]) == 0
    printed = capsys.readouterr().out
    ast.parse(printed)
    assert "DistrictPlan(\n" in printed and "params=GreedyParams(\n        n_plans=2,  # " in printed
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    assert cli(["script", str(bad), "--out", str(tmp_path / "x.py")]) == 2
    assert "not a report" in capsys.readouterr().err
    assert not (tmp_path / "x.py").exists()


def test_notebook_is_valid_nbformat(exported):
    report = exported["Stratified synthesis"][0]
    book = nbformat.reads(notebook_json(report), as_version=4)
    nbformat.validate(book)
    assert any("SynthesisPlan(" in cell.source for cell in book.cells if cell.cell_type == "code")
