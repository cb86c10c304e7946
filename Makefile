# tpu-pipeline: `make run` runs the pipeline on the built-in digits, `make test` runs every test.
# Both create the virtualenv from requirements.lock on first use.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
TOOLS := .tools
UV_VERSION := 0.13.8
PY := $(VENV)/bin/python
UV := $(TOOLS)/bin/uv
SYNCED := $(VENV)/.synced-lock
# Extra arguments for `make run`, e.g. make run ARGS="--dataset mnist".
ARGS ?=

# Python 3.10 from $$PYTHON, python3.10 on PATH, or pyenv's versions folder.
FIND_PYTHON := for c in "$${PYTHON:-}" python3.10 $$HOME/.pyenv/versions/3.10.*/bin/python3.10; do \
	  [ -n "$$c" ] && command -v "$$c" >/dev/null 2>&1 && \
	  "$$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null && { command -v "$$c"; exit 0; }; \
	done; exit 1

TFJS_VENV := .tfjs-venv
TFJS_SYNCED := $(TFJS_VENV)/.synced-lock
TFJS_NODE := clients/tfjs/node_modules/.package-lock.json

.PHONY: help run test test-fast lint bench bench-smoke lock tfjs clean

help:
	@echo "make run    run the pipeline on the built-in digits (ARGS=... for more flags)"
	@echo "make test   lint and run the whole test suite"
	@echo "make test-fast  lint and run every test not marked slow (the inner loop)"
	@echo "make lock   re-resolve requirements.in into requirements.lock"
	@echo "make bench-smoke  every benchmark section at smoke size (part of make test too)"
	@echo "make bench  benchmarks vs peers and hardware (BENCH_ARGS=\"--quick --only trainer,xla\")"
	@echo "make tfjs   convert the newest pushed model to TF.js and check it in Node (docs/serving/tfjs.md)"
	@echo "make clean  remove the virtualenvs and outputs"

$(UV):
	@py=$$($(FIND_PYTHON)) || { echo "error: Python 3.10 not found; install it (pyenv install 3.10) or set PYTHON=/path/to/python3.10" >&2; exit 1; }; \
	echo "Using $$py for the tool environment ($(TOOLS))"; \
	"$$py" -m venv $(TOOLS) && $(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set (as on our build machines) Python
# would otherwise compile TensorFlow's modules from source in every process (16.8 s of a
# 29 s `pytest --collect-only`).
$(SYNCED): requirements.lock setup.py | $(UV)
	@py=$$($(FIND_PYTHON)) || { echo "error: Python 3.10 not found; install it (pyenv install 3.10) or set PYTHON=/path/to/python3.10" >&2; exit 1; }; \
	[ -x $(PY) ] || { echo "Creating $(VENV) with $$py"; "$$py" -m venv $(VENV); }
	$(UV) pip sync --quiet --compile-bytecode --python $(PY) requirements.lock
	$(UV) pip install --quiet --python $(PY) --no-deps -e .
	@touch $@

run: $(SYNCED)
	$(VENV)/bin/tpu-pipeline run $(ARGS)

lint: $(SYNCED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Two pytest-xdist workers, a test module per worker (its module fixtures run once): in
# one process the suite kept one core busy on average (Beam, imports, child processes);
# on 2 cores two workers took 23 min where one took 39 (2026-12-02, before the weight
# histograms moved to the host); three took 6% longer than two (README's Development section).
# More cores: PYTEST_ARGS="-n auto --dist loadscope"; in one process: make test PYTEST_ARGS=
PYTEST_ARGS ?= -n 2 --dist loadscope

test: lint
	$(PY) -m pytest $(PYTEST_ARGS)

# The unit tests of every module, without the real pipeline runs and trainings.
test-fast: lint
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# Every benchmark section at smoke size (also part of `make test`): that `make bench` still
# runs after a change to the product's output, without the rest of the suite.
bench-smoke: $(SYNCED)
	$(PY) -m pytest tests/benchmarks/test_bench_smoke.py

# Not part of `make test`: timings belong to the benchmark, never to unit tests.
bench: $(SYNCED)
	$(PY) -m benchmarks.bench $(BENCH_ARGS)

# The TF.js converter cannot share requirements.lock (docs/serving/tfjs.md): its own venv.
$(TFJS_SYNCED): clients/tfjs/requirements.lock | $(UV)
	@py=$$($(FIND_PYTHON)) || { echo "error: Python 3.10 not found; install it (pyenv install 3.10) or set PYTHON=/path/to/python3.10" >&2; exit 1; }; \
	[ -x $(TFJS_VENV)/bin/python ] || { echo "Creating $(TFJS_VENV) with $$py"; "$$py" -m venv $(TFJS_VENV); }
	$(UV) pip sync --quiet --python $(TFJS_VENV)/bin/python clients/tfjs/requirements.lock
	@touch $@

$(TFJS_NODE): clients/tfjs/package-lock.json
	cd clients/tfjs && npm ci --no-audit --no-fund --silent

tfjs: $(SYNCED) $(TFJS_SYNCED) $(TFJS_NODE)
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) clients/tfjs/export_and_check.py --converter $(TFJS_VENV)/bin/tensorflowjs_converter $(ARGS)

lock: | $(UV)
	$(UV) pip compile requirements.in --python-version 3.10 \
	  --python-platform x86_64-manylinux_2_36 --quiet -o requirements.lock

clean:
	rm -rf $(VENV) $(TOOLS) $(TFJS_VENV) clients/tfjs/node_modules output .pytest_cache
