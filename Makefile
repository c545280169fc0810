# The two commands of the README: `make demo` (the main job) and `make test` (the whole suite).
# Both create .venv and install the project into it on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench docs gallery clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m asyncsdk demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Six test processes on any machine: much of the suite's time is spent waiting on servers and
# child processes, not computing; the docs site is built once, in one process.  Then the
# failovers and rolling restarts, two at a time, whose timings follow the machine's load; then
# the instruction-count gate by itself, whose counts do.  Bytecode is cached (in __pycache__,
# ignored by git) even where the shell says not to: each test process and the hundreds of child
# processes the suite starts would otherwise compile the package and the tests from source again.
test: export PYTHONDONTWRITEBYTECODE =
test: lint typecheck
	$(BIN)/python -m pytest -n 6 --dist loadgroup -m "not quiet and not alone"
	$(BIN)/python -m pytest -n 2 -m quiet
	$(BIN)/python -m pytest -m alone

# The receiver section needs wrk: a one-thread Python load generator saturates before the server
# does (the suite then refuses its req/s ratios).  Installed with apt-get when missing and allowed.
bench: $(STAMP)
	@command -v wrk >/dev/null 2>&1 || { \
		apt="apt-get"; [ "$$(id -u)" = 0 ] || apt="sudo -n apt-get"; \
		$$apt install -y wrk || { $$apt update && $$apt install -y wrk; }; \
	} || echo "make bench: could not install wrk; the receiver's req/s ratios may be refused"
	$(BIN)/python -m benchmarks

# The documentation site, built into site/ (`$(BIN)/mkdocs serve` to browse it while editing).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

# The before/after pictures of the README and the docs, made from the sandbox.
gallery: $(STAMP)
	$(BIN)/python scripts/make_gallery.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache results site
