# Two entry points: `make run` starts the dashboard, `make test` runs every test.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501
# Loopback only by default. `make run ADDRESS=0.0.0.0` opens it to the room's network for a live session:
# the curator's pages still need a curator's sign-in; guests get the room's page only (see README).
ADDRESS ?= 127.0.0.1

.PHONY: run test test-quick install install-dev chromium axe postgres bench bench-quick bench-peers clean cluster reproduce

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

# Debian's Chromium for the browser test and the PDF report; installed only when missing and only as root.
# Poppler's pdftoppm lets the report test look at a printed page.
chromium:
	@if { [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/pdftoppm ]; } && [ "$$(id -u)" = "0" ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium poppler-utils >/dev/null; \
	fi

# axe-core for the browser test's accessibility check, from the npm registry at the version its lock
# file names; installed only when missing (the test injects the file, so no page fetches it).
axe:
	@if [ ! -f tests/browser/node_modules/axe-core/axe.min.js ] && command -v npm >/dev/null; then \
		npm ci --prefix tests/browser --no-audit --no-fund --silent; \
	fi

# A local PostgreSQL server for the store tests' PostgreSQL variant (root only; SQLite runs regardless).
postgres:
	@scripts/test_postgres.sh $(VENV)/test_pg_url || echo "PostgreSQL unavailable: its store tests will be skipped."

# The first start of a fresh installation makes the first curator and prints their sign-in link once.
run: install
	$(PY) -m core curator first --address $(ADDRESS) --port $(PORT)
	$(PY) -m streamlit run dashboard/server.py --server.headless true --server.address $(ADDRESS) --server.port $(PORT) \
		--browser.gatherUsageStats false

# The suite runs on TEST_WORKERS processes (pytest-xdist), a test file to a worker (its module fixtures
# start once); each worker starts the shared dashboard server, Dask cluster and PostgreSQL test database
# only when one of its tests needs them (tests/conftest.py); each test has a deadline (pytest.ini).
TEST_WORKERS ?= 2
TEST_PG = DASHBOARD_TEST_PG_URL="$${DASHBOARD_TEST_PG_URL:-$$(cat $(VENV)/test_pg_url 2>/dev/null)}"

test: install-dev chromium axe postgres
	$(TEST_PG) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25 tests

# The edit loop's subset: core tests that are not marked slow (no browser, servers, clusters or notebooks).
test-quick: install-dev
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not slow and not browser" tests/unit

# Recompute the papers' headline numbers with the project's code; fails when a row fails.
reproduce: install
	$(PY) scripts/reproduce.py --errors

# Every benchmark, each compared call timed warm (benchmarks/timing.py; AIM's size curve is drawn by
# aim_estimator_bench.py with size_curves.py's functions), then the one table of their headline figures
# with the load and date of each (benchmarks/results/figures.md; the README's table).
bench: install
	for f in benchmarks/*_bench.py; do $(PY) $$f || exit 1; done
	$(PY) benchmarks/figures.py

# A subset of a few minutes: the core figures at their smaller sizes; the table keeps every other
# figure from its last full run, with that run's date.
bench-quick: install
	$(PY) benchmarks/census_bench.py
	$(PY) benchmarks/synthesis_bench.py
	$(PY) benchmarks/privacy_bench.py
	$(PY) benchmarks/gem_bench.py --sizes 50000 --sizes-only
	DASHBOARD_N_JOBS=1 $(PY) benchmarks/aim_estimator_bench.py --skip-mbi --sizes 50000,100000
	$(PY) benchmarks/figures.py

# Our AIM against packaged peers' AIM, each peer in its own virtualenv under .cache/peers (not a test).
bench-peers: install
	benchmarks/peers/run.sh --epsilon 0.1 --rows 50000

# A Dask scheduler and two single-threaded workers on this machine, every port on loopback (their
# --no-dashboard still opens one on all interfaces, hence --dashboard-address), from the project's
# virtualenv; Ctrl-C stops all three. In another shell: DASHBOARD_DASK_SCHEDULER=tcp://127.0.0.1:8786 make run
DASK_PORT ?= 8786
cluster: install
	@trap 'kill $$scheduler 2>/dev/null' EXIT INT TERM; \
	PYTHONPATH=$(CURDIR) $(VENV)/bin/dask scheduler --host 127.0.0.1 --port $(DASK_PORT) \
		--dashboard-address 127.0.0.1:0 & \
	scheduler=$$!; sleep 3; \
	echo "Dask scheduler at tcp://127.0.0.1:$(DASK_PORT); start the dashboard with DASHBOARD_DASK_SCHEDULER=tcp://127.0.0.1:$(DASK_PORT)"; \
	DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED=False PYTHONPATH=$(CURDIR) \
		$(VENV)/bin/dask worker tcp://127.0.0.1:$(DASK_PORT) --nworkers 2 --nthreads 1 \
		--host 127.0.0.1 --dashboard-address 127.0.0.1:0

clean:
	rm -rf $(VENV) .cache .pytest_cache
