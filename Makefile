PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all lint venv clean bench chromium

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m tileplan.cost.compiled  # compile the cost kernel once (numba caches it)
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/tileplan plan resnet50 --arch nmp

# The HTML report's browser test needs Debian's chromium; install it when missing and possible.
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1; } || \
	  echo "note: chromium is missing and could not be installed; the HTML report's browser test will be skipped"

# pytest runs on every core, at most 8 workers (pytest-xdist); `make test` leaves out the tests marked
# slow (each has a reduced version in the default run), `make test-all` runs everything.
WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -gt 8 ] && n=8; echo $$n)

test: $(STAMP) chromium
	$(BIN)/ruff check tileplan tests
	$(BIN)/mypy tileplan
	$(BIN)/pytest -n $(WORKERS) -m "not slow"

test-all: $(STAMP) chromium
	$(BIN)/ruff check tileplan tests
	$(BIN)/mypy tileplan
	$(BIN)/pytest -n $(WORKERS)

bench: $(STAMP)
	$(BIN)/tileplan bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
