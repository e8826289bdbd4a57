# Two entry points: `make run` starts the dashboard, `make test` runs every test.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501

.PHONY: run test install install-dev chromium postgres bench clean

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

# Debian's Chromium for the browser test; installed only when missing and only as root.
chromium:
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = "0" ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	fi

# A local PostgreSQL server for the store tests' PostgreSQL variant (root only; SQLite runs regardless).
postgres:
	@scripts/test_postgres.sh $(VENV)/test_pg_url || echo "PostgreSQL unavailable: its store tests will be skipped."

run: install
	$(PY) -m streamlit run dashboard/app.py --server.headless true --server.port $(PORT) \
		--browser.gatherUsageStats false

test: install-dev chromium postgres
	DASHBOARD_TEST_PG_URL="$${DASHBOARD_TEST_PG_URL:-$$(cat $(VENV)/test_pg_url 2>/dev/null)}" $(PY) -m pytest -q tests

bench: install
	for f in benchmarks/*_bench.py; do $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) .cache .pytest_cache
