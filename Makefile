# Fanyi: the two commands a new user needs.
#   make demo   export the demo EN->ZH model and translate a few sentences with it
#   make test   lint, type-check and run every test
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[export,dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check worker export_tools jobs tests benchmarks scripts
	$(BIN)/mypy worker export_tools jobs benchmarks scripts

test: lint
	$(BIN)/pytest -q

demo: $(STAMP)
	$(BIN)/python -m export_tools demo --out artifacts/demo --force
	printf 'Tom bought 3 apples for $$4.50.\nThe meeting starts at 9:30 am. Dr. Chen will arrive in Beijing on March 5, 2025.\n' \
	  | $(BIN)/python -m worker translate --artifact artifacts/demo

clean:
	rm -rf $(VENV) artifacts
