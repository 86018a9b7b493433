# `make demo` and `make test` are the two set-up commands on a fresh machine:
# each creates .venv and installs the project on first use.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST := $(PY) -m pytest -q -p no:cacheprovider

.PHONY: test test-tf test-jax lint format demo ui bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[experiments,dev]"
	touch $(STAMP)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(MAKE) --no-print-directory test-tf
	$(MAKE) --no-print-directory test-jax

test-tf: $(STAMP)
	KERAS_BACKEND=tensorflow $(PYTEST) -n 2 --durations=15 tests

test-jax: $(STAMP)
	KERAS_BACKEND=jax $(PYTEST) -n 2 -m "layers and not slow" tests

demo: $(STAMP)
	$(PY) -m experiments run demo

ui: $(STAMP)
	$(PY) -m experiments ui

bench: $(STAMP)
	$(PY) -m experiments bench --out bench.json

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .import_linter_cache
