# Set-up, tests, benchmark. Paper tables and figures: see the targets further down.
PY      ?= .venv/bin/python
## PY=path            the Python interpreter (default .venv/bin/python, made by make setup)
## DATA_DIR=path      the data sets (default $DATA_DIR, else ../shared/datasets when it exists, else data/)
# Data: clsuite.config.home.data_dir, the rule data.root follows too: $DATA_DIR, else ../shared/datasets when it
# exists, else data/ (make run downloads MNIST there, md5-checked). DATA_DIR=/path make run: your own copy.
ifndef DATA_DIR
DATA_DIR := $(shell python3 -c 'import sys; sys.path.insert(0, "src"); from clsuite.config.home import data_dir; print(data_dir())')
endif
export DATA_DIR
DOWNLOAD = $(if $(filter data,$(DATA_DIR)),data.download=true)

.PHONY: setup run test test-slow lint format bench bench-numerics golden

setup: .venv/.installed  ## .venv with the pinned requirements (CPU torch), once; again when requirements.txt changes
.venv/.installed: requirements.txt
	python3 -m venv .venv
	.venv/bin/pip install -q torch==2.13.0
	.venv/bin/pip install -q -r requirements.txt
	touch $@

run: setup            ## the main job: AdaER on split-MNIST, M=100 per class (1,000 slots), seed 0 (downloads MNIST into data/ if needed)
	$(PY) src/run.py $(DOWNLOAD)

# The bit-exact tests (marker `exact`) again under two other CPU kernel levels, so that a test whose
# exactness holds on this CPU only fails here, not on a user's machine (docs/notes/NUMERICS.md): one
# pytest, one worker per level (xdist's --dist each: every test on each worker), collecting only the
# files that hold them; those marked `pinned` set their own kernels, so the first pass ran them already.
EXACT_LEVELS = ATEN_CPU_CAPABILITY=default,MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=avx2,MKL_CBWR=AVX2
comma := ,
EXACT_TX = $(foreach level,$(EXACT_LEVELS),--tx popen//env:$(subst $(comma),//env:,$(level)))
test: setup           ## the fast test suite (synthetic data, CPU), then its bit-exact tests under two other kernel levels
	$(PY) -m pytest
	@echo "bit-exact tests under $(EXACT_LEVELS)"
	$(PY) -m pytest -o addopts="-q -p no:cacheprovider" -m "exact and not pinned and not slow" --dist each \
		$(EXACT_TX) $$(grep -rl --include='*.py' 'mark\.exact' tests)

golden: setup         ## rewrite tests/golden/portable.json (the portable mode's golden R), after a change meant to move numbers
	PYTHONPATH=src:. $(PY) -m tests.golden_runs --write

test-slow: setup      ## slow tests too (real MNIST files, sweeps)
	$(PY) -m pytest -m "slow or not slow"

lint: setup           ## ruff check + ruff format --check of src, tests, scripts (pyproject.toml)
	.venv/bin/ruff check src tests scripts && .venv/bin/ruff format --check src tests scripts

format: setup         ## ruff check --fix + ruff format of src, tests, scripts
	.venv/bin/ruff check --fix src tests scripts && .venv/bin/ruff format src tests scripts

# make bench BENCH_ARGS="--repeats 2 --methods er gss": fewer rounds or methods, on each line (docs/notes/PERFORMANCE.md)
BENCH_ARGS ?=
## BENCH_ARGS="..."   bench, bench-numerics: options of scripts/bench.py (e.g. --repeats 2 --methods er gss)
bench: setup          ## every method's time per batch vs ER, fwd/bwd work, time outside training: one process; then ER and AdaER on the ResNet; then the checkpoint cost
	$(PY) scripts/bench.py $(BENCH_ARGS)
	$(PY) scripts/bench.py --measure stream --benchmark split_cifar10 --methods er adaer --reading mir_code --batches 30 $(BENCH_ARGS)
	$(PY) scripts/bench.py --measure checkpoint $(BENCH_ARGS)

bench-numerics: setup ## each method's time per batch under trainer.numerics=native and =portable, side by side (docs/notes/NUMERICS.md)
	$(PY) scripts/bench.py --numerics native portable $(BENCH_ARGS)

# Mutation testing (mutmut, configured in pyproject.toml [tool.mutmut]): mutates metrics, learner,
# memory/, replay/, methods/ one change at a time and runs the fast tests that cover each change;
# prints the survivors. Slow (about 20 mutants a minute on 2 cores), so not part of `make test` or CI.
#   make mutants MUTANTS='clsuite.core.metrics*'      # one module;  .venv/bin/mutmut show <name>: its diff
MUTANTS ?=
## MUTANTS=glob       mutants: only these mutants (e.g. 'clsuite.core.metrics*')
.PHONY: mutants
mutants: setup        ## mutation testing of the core modules; prints surviving mutants (slow, not in CI)
	nice -n 10 .venv/bin/mutmut run $(MUTANTS); s=$$?; .venv/bin/mutmut results; exit $$s

# ---------------------------------------------------------------------------------------------
# Paper tables and figures: each target is `clsuite paper <target>` (src/clsuite/paper.py: the one
# home of what a target runs, also for an installed package): its sweep (sweeps/<name>.yaml, runs in
# multirun/<name>/, finished runs skipped on a rerun), then the aggregation (results/<name>/:
# Markdown + LaTeX tables, PNG + PDF figures, missing/failed runs). The target fails (after the
# tables are written) when a run failed; rerun it to retry only those.
#   make table2 BENCHMARKS=split_mnist,split_fmnist SEEDS=3 LAUNCHER=joblib
#   make table2 READING=paper_text                     # the paper's literal text (PROTOCOL 8)
#   make fig-memory LAUNCHER=slurm ARGS="hydra.launcher.partition=gpu"
# The variables of these targets (`make help` lists every `## VAR=` line of this file):
## READING=name       paper targets: paper_text | mir_code (conf/reading/; default mir_code; a comma list sweeps both)
## SEEDS=n            paper targets: seeds 0..n-1 (default 5; 10 for fig-choices, cells, machines, noise)
## BENCHMARKS=a,b     paper targets: these benchmarks instead of the sweep's own (e.g. split_mnist,split_fmnist)
## METHODS=a,b        paper targets: these methods instead of the sweep's own (e.g. er,mir,adaer)
## MEMORIES=a,b       paper targets: these memory sizes M instead of the sweep's own
## TAUS=a,b           paper targets: these tau values instead of the sweep's own
## LAMBDAS=a,b        paper targets: these imbalance lambdas instead of the sweep's own
## LAUNCHER=name      paper targets: basic | joblib | slurm | submitit_local (default basic)
## JOBS=n             paper targets, records, machines, noise: n parallel jobs (joblib workers)
## EXPERIMENT=name    paper targets: runs in multirun/<name>/, tables in results/<name>/ (default: the sweep's name)
## ARGS="k=v ..."     paper targets, cells, records, machines, noise: further Hydra overrides (e.g. trainer=cpu logger=wandb)
# Default reading, chosen by measurement: Table II (14 methods, split-MNIST and split-FMNIST) is closer
# to the paper's under mir_code than under paper_text; the numbers are the report's (docs/REPRODUCTION.md,
# "Which reading is closer to the paper's Table II"; docs/METHODS.md, "Readings").
READING    ?=
SEEDS      ?=
LAUNCHER   ?=
BENCHMARKS ?=
METHODS    ?=
MEMORIES   ?=
TAUS       ?=
LAMBDAS    ?=
EXPERIMENT ?=
JOBS       ?=
ARGS       ?=
PAPER_FLAGS = $(if $(SEEDS),--seeds $(SEEDS)) $(if $(READING),--reading $(READING)) \
	$(if $(LAUNCHER),--launcher $(LAUNCHER)) $(if $(JOBS),--jobs $(JOBS)) \
	$(if $(BENCHMARKS),--benchmarks $(BENCHMARKS)) $(if $(METHODS),--methods $(METHODS)) \
	$(if $(MEMORIES),--memories $(MEMORIES)) $(if $(TAUS),--taus $(TAUS)) $(if $(LAMBDAS),--lambdas $(LAMBDAS))

PAPER_TARGETS = table2 fig-memory fig-first-task fig-cifar100 fig-imbalance fig-tau fig-ablation fig-ablation-cifar100
.PHONY: paper help aggregate $(PAPER_TARGETS)

paper: $(PAPER_TARGETS)  ## every table and figure
table2:                  ## Table II -> results/table2/
fig-memory:              ## Figs. 5, 6 (Acc, BWT vs M) -> results/memory/
fig-first-task:          ## Fig. 7 (first task through the stream) -> results/first_task/
fig-cifar100:            ## Fig. 8 (split-CIFAR100) -> results/cifar100/
fig-imbalance:           ## Fig. 9 (lambda = 0.5 bars, Acc vs lambda) -> results/imbalance/
fig-tau:                 ## Fig. 10 (Acc and first task vs tau) -> results/tau/
fig-ablation:            ## Fig. 11 (C-CMR, E-BRS vs M) -> results/ablation/
fig-ablation-cifar100:   ## Fig. 12 (the ablation on split-CIFAR100) -> results/ablation_cifar100/

$(PAPER_TARGETS): setup
	$(PY) src/run.py paper $@ $(PAPER_FLAGS) $(if $(EXPERIMENT),--experiment $(EXPERIMENT)) $(ARGS)

# The paper's open choices (PROTOCOL 8): `clsuite paper choices`, one sweep per choice,
# sweeps/choices_<choice>.yaml -> multirun/choices_<choice>/ (EXPERIMENT is not used: each choice has
# its folder), each value against the reading's default for AdaER and the ablation the choice belongs
# to, split-MNIST and split-FMNIST, seeds 0..SEEDS-1 (10 unless SEEDS is given). The default's runs are
# one identity in every sweep: trained once, copied by the others (`reused_from`). Then the per-choice
# tables (results/choices_*/) and the paired ledger (results/choices/choices.md; also in `make report`).
# A sweep whose jobs failed does not stop the next one; a bad config (2) or an interrupt does.
# 10 seeds unless SEEDS is given (the open choices, the cell checks, make machines / noise)
CHOICE_SEEDS := $(or $(SEEDS),10)
.PHONY: fig-choices
fig-choices: setup       ## the paper's open choices, each alone vs the reading's default (10 seeds) -> results/choices/
	$(PY) src/run.py paper choices $(PAPER_FLAGS) $(ARGS)

# Table II cells checked by measurement (docs/REPRODUCTION.md, "Table II cells checked by measurement"):
# each cell's sweeps (sweeps/cells_*.yaml, the stored-logit rule's is the open choice
# sweeps/choices_logits_on_overwrite.yaml) -> one multirun/ folder per sweep, 10 seeds unless SEEDS
# is given; then their tables (`clsuite paper <sweep>`: a sweep of sweeps/ that is no paper target,
# aggregated as an ad-hoc sweep). The report's Table II notes read
# them (clsuite.analysis.cells: each variant against the default, paired by seed). A sweep whose jobs
# failed does not stop the next one; a bad config (2) or an interrupt does.
CELL_SWEEPS_joint  = cells_joint
CELL_SWEEPS_agem   = cells_agem_batch cells_agem_draw cells_agem_pool cells_agem_layout cells_agem_per_task
CELL_SWEEPS_logits = choices_logits_on_overwrite
CELL_SWEEPS_icarl  = cells_icarl_update cells_icarl_classifier
CELL_TARGETS = $(addprefix cell-,joint agem logits icarl)
.PHONY: cells $(CELL_TARGETS)
cells: $(CELL_TARGETS)   ## every Table II cell check below (10 seeds)
cell-joint:              ## Joint for 1, 2, 5, 10 passes -> multirun/cells_joint/
cell-agem:               ## A-GEM's reference batch, its draw and pool, the memory layout -> multirun/cells_agem_*/
cell-logits:             ## stored logits of an overwritten slot, MIR/C-CMR/E-BRS/AdaER -> multirun/choices_logits_on_overwrite/
cell-icarl:              ## iCaRL's herding vs reservoir, NME vs its head, CIFAR-10 JPEG copy (16 CPU-min a run) -> multirun/cells_icarl_*/
$(CELL_TARGETS): setup
	s=0; for c in $(CELL_SWEEPS_$(patsubst cell-%,%,$@)); do \
		$(PY) src/run.py paper $$c $(PAPER_FLAGS) $(if $(SEEDS),,--seeds $(CHOICE_SEEDS)) $(filter-out experiment=%,$(ARGS)) \
			|| { s=$$?; [ $$s -eq 1 ] || exit $$s; }; \
	done; exit $$s

# Parity of GSS, iCaRL and HAL with Mammoth's own classes on the suite's split, initial weights and
# batches (docs/notes/PARITY.md): MAMMOTH=<a Mammoth checkout>, pinned at e75a491 (git clone
# https://github.com/aimagelab/mammoth; git -C mammoth checkout e75a491). Trains (slow: one suite run
# and one Mammoth run per seed); writes the parity record results/parity/parity.json (every R and Acc)
# and prints its table, the report's; `clsuite records pack --parity results/parity/parity.json` puts
# it in docs/records/ (docs/INTEGRITY.md, section 8).
#   make parity MAMMOTH=../mammoth PARITY_ARGS="--methods hal --seeds 0 1"
# MIR=<a MIR checkout at 35eda78>: ER and MIR beside MIR's own er_main.py on the CIFAR-10 JPEG copy (seeds 0-2;
# PARITY_ARGS="--mir-seeds 0 --mir-train-per-class 100": a smoke test), alone or with MAMMOTH= in one record.
MAMMOTH ?=
MIR ?=
PARITY_ARGS ?=
## MAMMOTH=path       parity: a Mammoth checkout at e75a491 (this and/or MIR=)
## MIR=path           parity: a MIR checkout at 35eda78 (ER and MIR on the CIFAR-10 JPEG copy; this and/or MAMMOTH=)
## PARITY_ARGS="..."  parity: options of scripts/parity/harness.py (e.g. --methods hal --seeds 0 1)
.PHONY: parity
parity: setup            ## beside the reference codes: make parity MAMMOTH=<checkout> and/or MIR=<checkout> (docs/notes/PARITY.md)
	@test -n "$(MAMMOTH)$(MIR)" || { echo "error: MAMMOTH=<a Mammoth checkout at e75a491> and/or MIR=<a MIR checkout at 35eda78> is required" >&2; exit 2; }
	$(PY) scripts/parity/harness.py $(strip $(if $(MAMMOTH),--mammoth $(MAMMOTH)) $(if $(MIR),--mir $(MIR))) $(PARITY_ARGS)

help:                    ## this list: every target with its `##` note, then every variable (make TARGET VAR=value)
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-zA-Z0-9_-]+):.*## /\1\t/' | \
		awk -F'\t' '{ printf "  %-24s %s\n", $$1, $$2 }'
	@echo "Variables (make TARGET VAR=value ...):"
	@grep -hE '^## [A-Z_]+=' $(MAKEFILE_LIST) | sed -E 's/^## /  /'

EXP ?= table2
## EXP="a b"          aggregate, wandb: the experiments (folders of multirun/; default table2)
aggregate: setup       ## tables and figures from the runs on disk (any multirun/ folder): make aggregate EXP="memory tau"
	$(PY) src/run.py aggregate $(EXP)

# Numerics (docs/notes/NUMERICS.md): Table II of this code on this machine, under the CPU kernels of
# NUMERICS=native|portable -> multirun/machines_<NUMERICS>/ (compare machines: copy another machine's
# results/machines_*/runs.csv into docs/crossmachine/); and the numerical noise: ER, MIR, C-CMR, E-BRS and
# AdaER, seeds 0..SEEDS-1 (10 unless given), under each CPU kernel level of NOISE_LEVELS (one sweep per
# level: a process chooses its kernels once) -> multirun/noise_<level>/. Both read by `make report`.
NUMERICS ?= native
## NUMERICS=mode      machines: native | portable, the CPU kernels (default native)
NOISE_LEVELS = native: aten_avx2:ATEN_CPU_CAPABILITY=avx2 aten_default:ATEN_CPU_CAPABILITY=default \
	mkl_avx2:MKL_CBWR=AVX2 aten_avx2_mkl_avx2:ATEN_CPU_CAPABILITY=avx2,MKL_CBWR=AVX2 \
	aten_default_mkl_avx2:ATEN_CPU_CAPABILITY=default,MKL_CBWR=AVX2 portable:
NUMERICS_SWEEP = --config-dir sweeps --config-name table2 reading=mir_code benchmark=split_mnist,split_fmnist \
	'seed=range(0,$(CHOICE_SEEDS))' $(if $(JOBS),launcher=joblib hydra.launcher.n_jobs=$(JOBS)) $(ARGS)
.PHONY: machines noise
machines: SEEDS = $(CHOICE_SEEDS)
machines: setup          ## Table II (mir_code, split-MNIST/FMNIST) under NUMERICS=native|portable -> multirun/machines_<NUMERICS>/
	$(PY) src/run.py -m $(NUMERICS_SWEEP) experiment=machines_$(NUMERICS) trainer.numerics=$(NUMERICS)
noise: setup             ## ER, MIR, C-CMR, E-BRS, AdaER under every CPU kernel level of NOISE_LEVELS -> multirun/noise_*/
	for level in $(NOISE_LEVELS); do name=$${level%%:*}; vars=$${level#*:}; \
		mode=$$([ $$name = portable ] && echo portable || echo native); \
		env $$(echo $$vars | tr , " ") $(PY) src/run.py -m $(NUMERICS_SWEEP) method=er,mir,ccmr,ebrs,adaer \
			experiment=noise_$$name trainer.numerics=$$mode || exit $$?; done

# ---------------------------------------------------------------------------------------------
# The reproduction report, built only from the results files on disk (multirun/<experiment>/);
# trains nothing. Writes results/report/REPRODUCTION.md + figures/; DOCS=1 also docs/REPRODUCTION.md
# + docs/figures/, only when every section has runs (else it fails and leaves docs/ untouched).
# Each section it cannot fill is named with the sweep that fills it.
DOCS ?=
## DOCS=1             report: also docs/REPRODUCTION.md + docs/figures/, when every section has runs
.PHONY: report
report: setup          ## results/report/REPRODUCTION.md from multirun/ (DOCS=1: also docs/, if every section has runs)
	$(PY) src/run.py report $(if $(DOCS),--docs)

# The records (docs/records/: each experiment's sealed results files in one archive, and their manifest;
# docs/INTEGRITY.md, section 8). report-docs rebuilds docs/REPRODUCTION.md and docs/figures/ from them
# alone, without training; `make test` checks that the committed report is that build. records runs every
# split-MNIST/FMNIST sweep behind the report under portable kernels (`clsuite paper records`: finished
# runs skipped, shared ones reused; DRY_RUN=1: the commands and the number of runs to train), then packs
# them. replay reruns a random sample of the records' portable runs here and compares R and b bit for
# bit: REPLAY_ARGS="--sample 20 --seed 3 --methods online,er".
DRY_RUN ?=
REPLAY_ARGS ?=
## DRY_RUN=1          records: print the commands and the number of runs to train, train nothing
## REPLAY_ARGS="..."  replay: options of clsuite replay (e.g. --sample 20 --seed 3 --methods online,er)
.PHONY: report-docs records replay
report-docs: setup     ## docs/REPRODUCTION.md + docs/figures/ from docs/records/ alone (no training)
	$(PY) src/run.py report --records docs/records --docs
records: setup         ## every split-MNIST/FMNIST run of the report, portable, then packed into docs/records/ (JOBS=n)
	$(PY) src/run.py paper records $(if $(JOBS),--jobs $(JOBS)) $(if $(DRY_RUN),--dry-run) $(ARGS)
replay: setup          ## rerun a sample of the records' portable runs here, R and b compared bit for bit
	$(PY) src/run.py replay $(REPLAY_ARGS)

# ---------------------------------------------------------------------------------------------
# W&B from the results files on disk, no training: a W&B run for every grid point that has none
# (skipped, reused, or run with logger=csv) and one aggregate run with the experiment's charts and
# tables; offline (multirun/<exp>/*/wandb/, results/<exp>/wandb/) unless WANDB_MODE=online.
.PHONY: wandb
wandb: setup           ## W&B runs + charts of an experiment from its results files: make wandb EXP=table2
	$(PY) src/run.py wandb $(EXP)
