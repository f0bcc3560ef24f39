# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ngu_jax-installed

.PHONY: run test test-faults test-slow test-all test-quick test-learning test-reverb test-min bench clean

$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

## The main job: the smallest comparison in which NGU's lead is visible.
## NGU(N=1) with the embedding f learned by inverse dynamics against the same
## agent with f a fixed random projection (NGU Fig. 2's ablation) on Random
## Disco Maze (Sec. 4.1), 2 seeds each, RUN_STEPS env steps per run with the
## compiled loop, two runs at a time on one CPU thread each (about 11
## minutes on 2 CPU cores); then prints the IQM table and where the plots
## and heatmaps are (runs/make_run).
RUN_STEPS ?= 400000
run: $(STAMP)
	$(PY) -m experiments.disco_maze_coverage --variants ngu random_projection \
	  --seeds 0 1 --env-steps $(RUN_STEPS) --output-root runs/make_run \
	  --jobs 2 --threads 1 --fresh

## The whole test suite, on TEST_WORKERS pytest-xdist workers, one test file
## per worker at a time (tests/conftest.py keeps the files that use the Ray
## cluster together). Default: one per core, at most one per 8 GiB of memory
## (a worker peaks at about 5 GB, the Ray cluster beside it takes 3), and
## fewer than 2 runs in this process (0); `auto`: one per core.
TEST_WORKERS ?= $(shell awk -v cores="$$(nproc 2>/dev/null || echo 1)" \
  '/^MemTotal:/ { w = int($$2 / 8388608); if (w > cores) w = cores; \
  print (w < 2 ? 0 : w) }' /proc/meminfo 2>/dev/null || echo auto)
## `make test` is every test but those marked `slow`, `faults` and `learning`: unit
## tests of each component (jitted and not), tiny-config wiring runs of
## the three loops and the experiments, notebooks (README states its time on
## 2 cores; budget 15 minutes).
test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow and not faults"

## Fault injection in the Ray program (tests marked `faults`): each node kind
## (learner, replay, counter, evaluator, actor) killed with SIGKILL mid-run,
## restarted, and what it lost counted against the bound docs/design.md
## states (about a minute each, in one process: they share one Ray cluster).
## `.ci/run` runs it after `make test`.
test-faults: $(STAMP)
	$(PY) -m pytest -m faults tests/loops/distributed/test_faults.py

## The tests marked `slow`, which genuinely take minutes: checkpoint / resume
## of every variant in each loop, process kills in the Ray program, every
## environment family end to end, the benchmarks' smoke runs (16 minutes on
## 2 cores; CI does not run them: README, Tests).
test-slow: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -m slow

## `make test`, `make test-faults` and `make test-slow` in one run.
test-all: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

## For iteration: `make test` less the notebooks and the Ray program.
test-quick: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile \
	  -m "not slow and not notebook" --ignore=tests/loops/distributed \
	  --ignore=tests/experiments/test_distributed_benchmark.py

## The learning claims (tests marked `learning`, minutes each), which
## `make test` skips: an agent trained end to end must beat a threshold.
test-learning: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --learning -m learning

## The core unit tests and the Reverb replay backend on the oldest supported
## stack (jax 0.4.30, numpy 1.26) plus Reverb (tensorflow-cpu 2.15.1,
## dm-reverb 0.14.0), in a second environment: requirements/reverb.txt
## (= requirements/min-versions.txt + Reverb). NGU_JAX_REQUIRE_REVERB=1 turns
## a skipped Reverb test (Reverb not importable) into a failure.
REVERB_VENV ?= .venv-reverb
REVERB_STAMP := $(REVERB_VENV)/.ngu_jax-reverb-installed
$(REVERB_STAMP): setup.py requirements/min-versions.txt requirements/reverb.txt
	test -x $(REVERB_VENV)/bin/python || $(PYTHON) -m venv $(REVERB_VENV)
	$(REVERB_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(REVERB_VENV)/bin/python -m pip install --quiet -r requirements/reverb.txt
	$(REVERB_VENV)/bin/python -m pip install --quiet --no-deps -e .
	touch $(REVERB_STAMP)

## What this environment adds to `make test`: that the package imports and its
## components are correct on the oldest stack, the Reverb backend (every
## `reverb`-marked test lives in tests/replay and tests/agents), and one run
## of the Python loop end to end (env, actor, adder, replay, learner,
## checkpoint, resume). The loops, experiments and notebooks run on the
## newest stack only (`make test`).
REVERB_TESTS := tests/test_*.py tests/intrinsic tests/losses tests/networks tests/meta \
  tests/replay tests/agents tests/envs \
  tests/loops/test_host.py::test_python_loop_rows_and_a_resumed_run
test-reverb: $(REVERB_STAMP)
	NGU_JAX_REQUIRE_REVERB=1 $(REVERB_VENV)/bin/python -m pytest \
	  -n $(TEST_WORKERS) --dist loadfile \
	  -m "not slow and not notebook" -p no:cacheprovider $(REVERB_TESTS)

## The same environment and tests under the name of the oldest stack.
test-min: test-reverb

## DI-engine's NGU, timed on MiniGrid by
## experiments/benchmarks/di_engine_minigrid.py, in an environment of its own
## (torch, gym 0.25, numpy < 2): requirements/di-engine.txt. Not part of
## `make test` or `make bench` (about 5 GB).
DI_ENGINE_VENV ?= .venv-di-engine
DI_ENGINE_STAMP := $(DI_ENGINE_VENV)/.di-engine-installed
$(DI_ENGINE_STAMP): requirements/di-engine.txt
	test -x $(DI_ENGINE_VENV)/bin/python || $(PYTHON) -m venv $(DI_ENGINE_VENV)
	$(DI_ENGINE_VENV)/bin/python -m pip install --quiet -r requirements/di-engine.txt
	touch $(DI_ENGINE_STAMP)

.PHONY: bench-di-engine
bench-di-engine: $(STAMP) $(DI_ENGINE_STAMP)
	$(PY) -m experiments.benchmarks.di_engine_minigrid \
	  --di-engine-python $(DI_ENGINE_VENV)/bin/python $(BENCH_ARGS)

## Benchmarks (figures recorded in docs/performance.md).
bench: $(STAMP)
	$(PY) -m experiments.benchmarks.episodic_memory
	$(PY) -m experiments.benchmarks.learner_step
	$(PY) -m experiments.benchmarks.learner_profile
	$(PY) -m experiments.benchmarks.envs
	$(PY) -m experiments.benchmarks.replay
	$(PY) -m experiments.benchmarks.actor_step
	$(PY) -m experiments.benchmarks.loops
	$(PY) -m experiments.benchmarks.distributed
	$(PY) -m experiments.benchmarks.recode_memory

clean:
	rm -rf $(VENV) $(REVERB_VENV) $(DI_ENGINE_VENV) .pytest_cache build *.egg-info
