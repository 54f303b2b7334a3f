# benchmatrix: `make demo` sets everything up and runs the quickstart end to end;
# `make test` runs the whole test suite (what CI runs, through .ci/run).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SPEC   ?= config/experiments/quickstart.yaml

.PHONY: setup test-setup test-deps demo test test-fast lint clean

# The runtime dependencies only: what `make demo` and a user of bmx need.
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/bootstrap.sh
	scripts/bootstrap.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

# The test and lint tools (pytest, hypothesis, ruff, snakefmt, ansible-lint) on top.
test-setup: $(VENV)/.installed-test

$(VENV)/.installed-test: pyproject.toml | setup
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# The real tools the tests drive (fio, sshd, PostgreSQL, sysbench, Chromium, ...).
test-deps: $(VENV)/.test-deps

$(VENV)/.test-deps: scripts/bootstrap.sh | setup
	scripts/bootstrap.sh --test
	touch $@

demo: setup
	$(BIN)/bmx run $(SPEC)

# Two pytest-xdist workers, each taking a whole test file at a time (its module
# fixtures, such as a shared campaign, stay with it): most of the suite waits on real
# campaigns, so two workers on 2 cores take about half the time of one.
TEST_WORKERS ?= 2

# PYTHONDONTWRITEBYTECODE is emptied for the tests: every campaign starts bmx, Snakemake
# and a script per job, and each would compile benchmatrix again (0.3 s of CPU a process).
# PYTEST_ARGS adds options: --update-file-seconds rewrites tests/file_seconds.json (the
# slow-file order a clean clone uses) from the run.
PYTEST_ARGS ?=
test: test-setup test-deps
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=30 $(PYTEST_ARGS)

# Unit tests only (no Snakemake/Ansible/fio campaigns).
test-fast: test-setup
	$(BIN)/python -m pytest -m "not slow"

# The four checks the suite runs (tests/lint/test_lint.py). snakemake --lint goes through
# its test: it runs in a copy of the project and allows exactly one lint ("Specify a conda
# environment or container", which does not apply: the rules drive real hosts with this venv).
lint: test-setup
	$(BIN)/ruff check benchmatrix tests bench scripts
	$(BIN)/snakefmt --check Snakefile workflow/
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/lint/test_lint.py -k snakemake_lint_only
	$(BIN)/ansible-lint --profile production playbooks/

clean:
	rm -rf results .snakemake
