# Fanyi: the two commands a new user needs.
#   make demo   build the demo EN->ZH artifact and run a job on it: throwaway Redis, one worker, local Parquet
#   make test   lint, type-check and run every test
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[export,dev,server]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check contract worker export_tools jobs tests benchmarks scripts
	$(BIN)/mypy contract worker export_tools jobs benchmarks scripts  # pyproject: every def annotated

test: lint
	$(BIN)/pytest -q

demo: $(STAMP)
	$(BIN)/python -m jobs demo

clean:
	rm -rf $(VENV) artifacts results
