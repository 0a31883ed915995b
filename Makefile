# One-command entry points. Everything installs into .venv from constraints.txt.
#
# `make demo` and `make up` need only Python and make: they install the project and
# Airflow. `make install` adds the google and common-ai extras and the development groups (test, dev,
# distributed; pyproject.toml). `make test` also installs, where apt-get exists, the
# Debian packages of the browser and compose file tests (devstack/install_system_packages.sh);
# elsewhere it says which and those tests skip.
PYTHON ?= python3
# uv leaves compiling to each module's first import, which writes its bytecode for every
# later process (below). Where the environment sets PYTHONDONTWRITEBYTECODE nothing is
# written, and every service, test and CLI call compiles Airflow again: on a 2-core machine
# `import airflow.models` took 12 s of a core instead of 5, and the suite's stacks timed out.
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
BIN := $(VENV)/bin
# the project and its pinned dependencies: enough for demo and up
RUNTIME := $(VENV)/.runtime-stamp
# and everything the tests, the linters and the build need
STAMP := $(VENV)/.installed-stamp
CONSTRAINTS := --constraint constraints.txt
UV_INSTALL := $(BIN)/uv pip install --quiet --python $(BIN)/python

# `make up AIRFLOW=3.1` (or 3.2): the example on an older Airflow minor, in a virtualenv of
# its own (.venv-3.1) with that minor from its constraints file (constraints-3.1.txt) and the
# package from its wheel, not the checkout, on the Python the minor is tested on (noxfile.py).
# Its Airflow home is .airflow-3.1: a metadata DB migrated by a newer Airflow cannot go back.
AIRFLOW ?=
MINOR_VENV := .venv-$(AIRFLOW)
MINOR_PYTHON_3.1 := 3.10
MINOR_PYTHON_3.2 := 3.12
MINOR_PYTHON := $(MINOR_PYTHON_$(AIRFLOW))
# pyenv's interpreter when it has one (its shims answer only for the active version)
MINOR_INTERPRETER = $(or $(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/$(MINOR_PYTHON).*/bin/python$(MINOR_PYTHON)))),python$(MINOR_PYTHON))
MINOR_STAMP := $(MINOR_VENV)/.wheel-stamp
PACKAGE_FILES := $(shell find airflow_retrywindow -type f -not -name '*.pyc' 2>/dev/null)

.PHONY: install system-packages test lint demo up test-distributed nox wheel-check bench \
	constraints clean

# __init__.py holds the version, which the installed metadata repeats. pip installs uv
# (pinned in constraints.txt), and uv installs the rest: it downloads in parallel and
# compiles only what is imported, several times faster than pip for Airflow's 330 packages.
$(RUNTIME): pyproject.toml constraints.txt airflow_retrywindow/__init__.py
	@echo "==> installing the project and its pinned dependencies into $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check $(CONSTRAINTS) uv
	@$(UV_INSTALL) $(CONSTRAINTS) --editable .
	@touch $@

$(STAMP): $(RUNTIME)
	@echo "==> installing the google and common-ai extras and the test, dev and distributed groups"
	@$(UV_INSTALL) $(CONSTRAINTS) --editable ".[google,common-ai]" \
		--group test --group dev --group distributed
	@touch $@

install: $(STAMP)

system-packages:
	@bash devstack/install_system_packages.sh

# four workers on two cores: the tests on a real Airflow mostly wait on it. In CI, beside
# the nox sessions and the distributed path, three left the machine idle in the suite's
# last minutes: four took 1,101 s where three took 1,204, for the same CPU seconds
TEST_WORKERS ?= 4
test: install system-packages
	$(BIN)/python -m pytest --numprocesses $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not alone"

# the breaker's fleets end to end (outage, brownout, faults), one module at a time on a
# machine of their own, about 17 minutes: each measures how the scheduler paces a fleet
# round by round, which a machine as busy as make test's (or CI's) does not keep
test-alone: install
	$(BIN)/python -m pytest -m alone

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# VERBOSE=1 also prints every task's state changes and every decision in full
# (by default they go to .demo/details.log and each day prints one screen)
demo: $(RUNTIME)
	@$(BIN)/python -m devstack.demo $(if $(filter-out 0,$(VERBOSE)),--verbose)

ifeq ($(AIRFLOW),)
up: $(RUNTIME)
	@$(BIN)/python -m devstack.up
else
up: $(MINOR_STAMP)
	@$(MINOR_VENV)/bin/python -m devstack.up
endif

# uv alone, to build the wheel and install a minor's virtualenv
$(BIN)/uv:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --disable-pip-version-check $(CONSTRAINTS) uv

$(MINOR_STAMP): constraints-$(AIRFLOW).txt pyproject.toml $(PACKAGE_FILES) | $(BIN)/uv
	@test -n "$(MINOR_PYTHON)" || { echo "AIRFLOW=$(AIRFLOW): make up takes AIRFLOW=3.1 or 3.2"; exit 2; }
	@echo "==> Airflow $(AIRFLOW) on Python $(MINOR_PYTHON) and the package's wheel, into $(MINOR_VENV)"
	@test -x $(MINOR_VENV)/bin/python || $(BIN)/uv venv --quiet --python $(MINOR_INTERPRETER) $(MINOR_VENV)
	@rm -rf $(MINOR_VENV)/dist
	@$(BIN)/uv build --quiet --wheel --out-dir $(MINOR_VENV)/dist .
	@$(BIN)/uv pip install --quiet --python $(MINOR_VENV)/bin/python --reinstall-package airflow-retrywindow \
		--constraint constraints-$(AIRFLOW).txt $(MINOR_VENV)/dist/*.whl
	@touch $@

test-distributed: install
	@$(BIN)/python -m devstack.distributed

# each Airflow minor's subset on its Python: 3.1 on 3.10 and 3.2 on 3.12 on a real Airflow, 3.3 on
# 3.13 what differs by Python (noxfile.py);
# one: NOX_ARGS="-s airflow-3.1"
nox: install
	$(BIN)/nox $(NOX_ARGS)

# build the sdist and the wheel, check them, install the wheel into a fresh virtualenv
wheel-check: install
	$(BIN)/python -m devstack.wheel_check

# install, not only the runtime: benchmarks/cli_and_model.py builds the wheel (the dev
# group's build), benchmarks/breaker_hold.py uses a PostgreSQL at 127.0.0.1:5432 with the
# distributed group's driver and runs a whole Airflow twice per size (about 11 minutes in
# all). baseline_stdlib.py is the CLI benchmark's yardstick, no benchmark of its own
bench: install
	@for script in $(filter-out benchmarks/baseline_stdlib.py,$(wildcard benchmarks/*.py)); do \
		echo "==> $$script"; $(BIN)/python $$script || exit 1; done

constraints:
	@$(BIN)/python -m pip freeze --exclude-editable | grep -v airflow-retrywindow > constraints.new
	@echo "review constraints.new, then move it over constraints.txt (keep the header)"

clean:
	rm -rf .airflow .airflow-3.* .demo .test-runs .pytest_cache .mypy_cache .ruff_cache
