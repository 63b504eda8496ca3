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

# ---------------------------------------------------------------------------------------------
# Paper tables and figures: each target runs its sweep (sweeps/<name>.yaml, runs in
# multirun/<name>/, finished runs skipped on a rerun) and then the aggregation (results/<name>/:
# Markdown + LaTeX tables, PNG + PDF figures, missing/failed runs). The target fails (after the
# tables are written) when a run failed; rerun it to retry only those.
#   make table2 BENCHMARKS=split_mnist,split_fmnist SEEDS=3 LAUNCHER=joblib
#   make fig-memory LAUNCHER=slurm ARGS="hydra.launcher.partition=gpu"
# SEEDS=n: seeds 0..n-1 (default 5)   BENCHMARKS=, METHODS=, MEMORIES=, TAUS=, LAMBDAS=: comma lists
# replacing the sweep's own   LAUNCHER=basic|joblib|slurm|submitit_local   JOBS=n: joblib workers
# ARGS=: any further Hydra overrides (e.g. trainer=cpu logger=wandb memory_per_class=true)
SEEDS      ?= 5
LAUNCHER   ?= basic
BENCHMARKS ?=
METHODS    ?=
MEMORIES   ?=
TAUS       ?=
LAMBDAS    ?=
JOBS       ?=
ARGS       ?=
SWEEP_ARGS = launcher=$(LAUNCHER) 'seed=range(0,$(SEEDS))' \
	$(if $(BENCHMARKS),benchmark=$(BENCHMARKS)) $(if $(METHODS),method=$(METHODS)) \
	$(if $(MEMORIES),memory=$(MEMORIES)) $(if $(TAUS),tau=$(TAUS)) $(if $(LAMBDAS),lambda=$(LAMBDAS)) \
	$(if $(JOBS),hydra.launcher.n_jobs=$(JOBS)) $(ARGS)
# $(call paper,<sweep>): the sweep, then its tables and figures whatever the sweep's outcome.
paper = ( $(PY) src/run.py --config-dir sweeps --config-name $(1) $(SWEEP_ARGS); s=$$?; \
	$(PY) scripts/aggregate.py $(1) || s=$$?; exit $$s )

.PHONY: paper table2 fig-memory fig-first-task fig-cifar100 fig-imbalance fig-tau fig-ablation fig-ablation-cifar100 aggregate

paper: table2 fig-memory fig-first-task fig-cifar100 fig-imbalance fig-tau fig-ablation  ## every table and figure

table2: setup          ## Table II -> results/table2/
	$(call paper,table2)

fig-memory: setup      ## Figs. 5, 6 (Acc, BWT vs M) -> results/memory/
	$(call paper,memory)

fig-first-task: setup  ## Fig. 7 (first task through the stream) -> results/first_task/
	$(call paper,first_task)

fig-cifar100: setup    ## Fig. 8 (split-CIFAR100) -> results/cifar100/
	$(call paper,cifar100)

fig-imbalance: setup   ## Fig. 9 (lambda = 0.5 bars, Acc vs lambda) -> results/imbalance/
	$(call paper,imbalance)

fig-tau: setup         ## Fig. 10 (Acc and first task vs tau) -> results/tau/
	$(call paper,tau)

fig-ablation: setup    ## Figs. 11, 12 (C-CMR, E-BRS vs M; on split-CIFAR100) -> results/ablation*/
	$(call paper,ablation); s=$$?; t=0; \
	if [ -z "$(BENCHMARKS)" ] || echo "$(BENCHMARKS)" | grep -q split_cifar100; then \
		$(MAKE) --no-print-directory fig-ablation-cifar100 BENCHMARKS=; t=$$?; fi; \
	[ $$s -eq 0 ] && exit $$t; exit $$s

fig-ablation-cifar100: setup  ## Fig. 12 only (split-CIFAR100; BENCHMARKS does not apply) -> results/ablation_cifar100/
	$(call paper,ablation_cifar100)

EXP ?= table2
aggregate: setup       ## tables and figures only, from the runs on disk: make aggregate EXP=memory
	$(PY) scripts/aggregate.py $(EXP)

# ---------------------------------------------------------------------------------------------
# The reproduction report: docs/REPRODUCTION.md + docs/figures/, built only from the results files
# on disk (multirun/<experiment>/); trains nothing. Each section names the sweep that fills it.
.PHONY: report
report: setup          ## docs/REPRODUCTION.md from multirun/ (tables, figures, claims, CIFAR estimate)
	$(PY) scripts/report.py
