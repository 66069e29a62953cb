PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-all lint venv clean bench chromium docs docs-images docs-check

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,interop]'
	$(BIN)/python -m compileall -q tileplan  # bytecode now: a read-only install never recompiles it
	$(BIN)/python -m tileplan.warmup  # compile every loop once (numba caches it), then build their extensions (cost.aot)
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

# mypy (one process, ~27 CPU-s fresh) runs alongside pytest instead of before it: on 2 cores it fills the
# gaps the workers leave (start-up, the last tests) rather than adding its whole time. Its output is held
# in a file and printed after pytest's; the target fails when either fails. Ctrl-C stops both.
define typed_and_tested
	$(BIN)/ruff check tileplan tests
	@echo '$(BIN)/mypy tileplan (alongside) & $(BIN)/pytest -n $(WORKERS) -m "$(1)"'
	@log=$$(mktemp); $(BIN)/mypy tileplan >"$$log" 2>&1 & m=$$!; \
	trap 'kill $$m 2>/dev/null; rm -f "$$log"; exit 130' INT TERM; \
	$(BIN)/pytest -n $(WORKERS) -m "$(1)"; t=$$?; \
	wait $$m; y=$$?; echo "mypy tileplan:"; cat "$$log"; rm -f "$$log"; \
	[ $$t -eq 0 ] && [ $$y -eq 0 ]
endef

test: $(STAMP) chromium
	$(call typed_and_tested,not slow)

test-all: $(STAMP) chromium
	$(call typed_and_tested,slow or not slow)

bench: $(STAMP)
	$(BIN)/tileplan bench

# docs/cli.md is generated from the commands' own --help (tests/test_docs.py fails while it is stale).
docs: $(STAMP)
	$(BIN)/python -m tileplan.cli.docgen > docs/cli.md.tmp && mv docs/cli.md.tmp docs/cli.md

# The README's picture: ResNet-18 on the Eyeriss-like preset, drawn by `plan --plots`.
docs-images: $(STAMP)
	@tmp=$$(mktemp -d) && $(BIN)/tileplan plan resnet18 --arch eyeriss --plots $$tmp/figs >/dev/null && \
	  mkdir -p docs/img && cp $$tmp/figs/roofline.svg docs/img/resnet18-eyeriss-roofline.svg && rm -rf $$tmp && \
	  echo "wrote docs/img/resnet18-eyeriss-roofline.svg"

# Every command in README.md and docs/ (tests/test_docs.py), the long-running ones included.
docs-check: $(STAMP)
	TILEPLAN_DOCS_CHECK=1 $(BIN)/pytest -p no:cacheprovider tests/test_docs.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
