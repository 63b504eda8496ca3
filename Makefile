# Set-up, tests, benchmark. Paper tables and figures: see the targets further down.
PY      ?= .venv/bin/python
DATA_DIR ?= ../shared/datasets
export DATA_DIR

.PHONY: setup run test test-slow lint format bench

setup: .venv/.installed
.venv/.installed: requirements.txt
	python3 -m venv .venv
	.venv/bin/pip install -q torch==2.13.0
	.venv/bin/pip install -q -r requirements.txt
	touch $@

run: setup            ## the main job: AdaER on split-MNIST, M=100, seed 0
	$(PY) src/run.py

test: setup           ## the fast test suite (synthetic data, CPU)
	$(PY) -m pytest

test-slow: setup      ## slow tests too (real MNIST files, sweeps)
	$(PY) -m pytest -m "slow or not slow"

lint: setup
	.venv/bin/ruff check src tests scripts && .venv/bin/ruff format --check src tests scripts

format: setup
	.venv/bin/ruff check --fix src tests scripts && .venv/bin/ruff format src tests scripts

bench: setup          ## Lightning suite vs a bare PyTorch loop, side by side in one run
	$(PY) scripts/bench.py
