# benchmatrix: `make demo` sets everything up and runs the quickstart end to end;
# `make test` runs the whole test suite (what CI runs, through .ci/run).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SPEC   ?= config/experiments/quickstart.yaml

.PHONY: setup demo test test-fast clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/bootstrap.sh
	scripts/bootstrap.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

demo: setup
	$(BIN)/bmx run $(SPEC)

test: setup
	$(BIN)/python -m pytest

# Unit tests only (no Snakemake/Ansible/fio campaigns).
test-fast: setup
	$(BIN)/python -m pytest -m "not slow"

clean:
	rm -rf results .snakemake
