# `make demo` and `make test` are the two set-up commands on a fresh machine:
# each creates .venv and installs the project on first use.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
# PyTorch, installed into .venv for test-torch and test-tf (the CPU wheel where pip's config has one).
TORCH       := torch==2.13.0
TORCH_STAMP := $(VENV)/.torch-installed
# The oldest versions pyproject.toml allows (`make test-oldest`): a venv of its own.
OLDEST    := .venv-oldest
OLDEST_PY := $(OLDEST)/bin/python

.PHONY: test test-tf test-jax test-torch test-oldest dist lint format demo ui bench clean

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
	$(MAKE) --no-print-directory test-torch

# Needs torch too: tests/test_cross_backend.py loads TensorFlow's .keras files on JAX and torch.
test-tf: $(TORCH_STAMP)
	KERAS_BACKEND=tensorflow $(PYTEST) -n 2 --durations=15 tests

test-jax: $(STAMP)
	KERAS_BACKEND=jax $(PYTEST) -n 2 -m "layers and not slow" tests

$(TORCH_STAMP): $(STAMP)
	$(PY) -m pip install -q $(TORCH)
	touch $(TORCH_STAMP)

test-torch: $(TORCH_STAMP)
	KERAS_BACKEND=torch $(PYTEST) -n 2 -m "layers and not slow" tests

# The layer suite and one runner test on the lower bounds of pyproject.toml (TensorFlow).
test-oldest: $(STAMP)
	rm -rf $(OLDEST)
	$(VENV)/bin/uv venv -q -p $(PY) $(OLDEST)
	$(PY) .ci/lower_bounds.py > $(OLDEST)/constraints.txt
	$(VENV)/bin/uv pip install -q -p $(OLDEST_PY) -c $(OLDEST)/constraints.txt \
		-e ".[experiments,plotting]" pytest pytest-xdist hypothesis
	$(VENV)/bin/uv pip list -q -p $(OLDEST_PY) | grep -iE "^(keras|tensorflow|mlflow|numpy|pydantic) "
	KERAS_BACKEND=tensorflow $(OLDEST_PY) -m pytest -q -p no:cacheprovider -n 2 -m layers tests
	KERAS_BACKEND=tensorflow $(OLDEST_PY) -m pytest -q -p no:cacheprovider \
		"tests/test_experiments_runs.py::test_run_logs_everything[reverse]"

# sdist + wheel in dist/, checked by twine; the wheel holds the library only.
dist: $(STAMP)
	rm -rf build dist keras_attn_rnn.egg-info
	$(PY) -m build -o dist
	$(VENV)/bin/twine check --strict dist/*
	$(PY) .ci/check_wheel.py dist/*.whl

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
	rm -rf $(VENV) $(OLDEST) .pytest_cache .ruff_cache .import_linter_cache build dist
