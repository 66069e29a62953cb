PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint venv clean bench chromium

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q tileplan  # bytecode now: a read-only install never recompiles it
	$(BIN)/python -m tileplan.warmup  # compile every loop once (numba caches it)
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/tileplan plan resnet50 --arch nmp

# The HTML report's browser test needs Debian's chromium; install it when missing and possible.
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1; } || \
	  echo "note: chromium is missing and could not be installed; the HTML report's browser test will be skipped"

test: $(STAMP) chromium
	$(BIN)/ruff check tileplan tests
	$(BIN)/mypy tileplan
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/tileplan bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
