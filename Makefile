# perflab: two commands.
#   make lab    set up everything (first run) and open JupyterLab on 127.0.0.1 at the lab index
#   make test   set up everything (first run), lint (ruff) and run the whole test suite
#   make unit   the inner loop: lint and the unit tests only (no notebook, browser, service or grader), < 1 min
# Needs only Python >= 3.11 and make. PYTHON=python3.12 make lab picks another interpreter.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.perflab-installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)
PORT   ?= 8888
# the suite's pytest workers (pytest-xdist): two, one per core of the 2-core machine the budget is set on
# (tests/README.md); TEST_WORKERS=0 runs it in this process
TEST_WORKERS ?= 2

.PHONY: lab test test-laptop unit setup benchmarks clean

lab: $(STAMP)
	$(BIN)/jupyter lab --ip=127.0.0.1 --port=$(PORT) $(ROOT_FLAG) \
	  --LabApp.news_url=None --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
	  notebooks/index.ipynb

test: $(STAMP)
	$(BIN)/ruff check labkit tests
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not laptop"

test-laptop: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m laptop tests/test_laptop.py

unit: $(STAMP)
	$(BIN)/ruff check labkit tests
	$(BIN)/python -m pytest -q -m "not slow"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "perflab needs Python 3.11 or newer; run: PYTHON=python3.11 make ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@$(BIN)/python -m labkit.workshop.sharing $(VENV)  # warns when a hub's learners could not run this venv
	touch $(STAMP)

benchmarks: $(STAMP)
	@for b in tests/benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) results .pytest_cache
