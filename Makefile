PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv clean bench

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m tileplan.cost.compiled  # compile the cost kernel once (numba caches it)
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/tileplan plan resnet50 --arch nmp

test: $(STAMP)
	$(BIN)/ruff check tileplan tests
	$(BIN)/mypy tileplan
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/tileplan bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
