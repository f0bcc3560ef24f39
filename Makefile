# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ngu_jax-installed

.PHONY: run test test-quick bench clean

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

## Benchmarks (figures recorded in README).
bench: $(STAMP)
	$(PY) -m experiments.benchmarks.episodic_memory

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
