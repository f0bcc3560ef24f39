# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ngu_jax-installed

.PHONY: run test test-quick test-min bench clean

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

## The main job (until the agent exists: a demonstration of the components).
run: $(STAMP)
	$(PY) -m experiments.demo

## The whole test suite.
test: $(STAMP)
	$(PY) -m pytest

## Everything but the tests marked slow, for iteration.
test-quick: $(STAMP)
	$(PY) -m pytest -m "not slow"

## The core unit tests on the oldest supported stack (jax 0.4.30, numpy 1.26),
## in a second environment: requirements/min-versions.txt.
MIN_VENV ?= .venv-min
MIN_STAMP := $(MIN_VENV)/.ngu_jax-installed
$(MIN_STAMP): setup.py requirements/min-versions.txt
	test -x $(MIN_VENV)/bin/python || $(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MIN_VENV)/bin/python -m pip install --quiet -r requirements/min-versions.txt
	$(MIN_VENV)/bin/python -m pip install --quiet --no-deps -e .
	touch $(MIN_STAMP)

test-min: $(MIN_STAMP)
	$(MIN_VENV)/bin/python -m pytest -m "not slow and not notebook" -p no:cacheprovider

## Benchmarks (figures recorded in README).
bench: $(STAMP)
	$(PY) -m experiments.benchmarks.episodic_memory

clean:
	rm -rf $(VENV) $(MIN_VENV) .pytest_cache build *.egg-info
