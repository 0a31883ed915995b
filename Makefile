# One-command entry points. Everything installs into .venv from constraints.txt.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install test lint demo up test-distributed bench constraints clean

$(STAMP): pyproject.toml constraints.txt
	@echo "==> installing the project and its pinned dependencies into $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[test,dev,distributed]"
	@touch $@

install: $(STAMP)
	@bash devstack/install_system_packages.sh

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

demo: install
	@$(BIN)/python -m devstack.demo

up: install
	@$(BIN)/python -m devstack.up

test-distributed: install
	@$(BIN)/python -m devstack.distributed

bench: install
	@for script in benchmarks/*.py; do echo "==> $$script"; $(BIN)/python $$script || exit 1; done

constraints:
	@$(BIN)/python -m pip freeze --exclude-editable | grep -v airflow-retrywindow > constraints.new
	@echo "review constraints.new, then move it over constraints.txt (keep the header)"

clean:
	rm -rf .airflow .demo .test-runs .pytest_cache .mypy_cache .ruff_cache
