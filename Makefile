# `make demo` and `make test` are the two set-up commands on a fresh machine:
# each creates .venv and installs the project on first use.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
# Two pytest workers on two cores, tiny shapes: one thread per worker is faster
# (TensorFlow -8 %, PyTorch -18 % wall on the model tests), and LLVM's optimisation
# of JAX's many small programs costs more than it saves (-23 %).
ONE_THREAD := OMP_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1
JAX_FAST   := XLA_FLAGS=--xla_backend_optimization_level=0
# JAX's programs and the slow tests' many short processes compile the same programs again:
# the JAX processes share a persistent compilation cache, emptied at the start of each run
# (a JAX process of the crash test: 132 s -> 45 s; the JAX layer suite -11 %). COMPILE_ONCE is
# what test-jax and test-slow run with: one thread, XLA without LLVM's optimisation (above)
# and that cache.
JAX_CACHE    := $(CURDIR)/.jax-cache
COMPILE_ONCE := $(ONE_THREAD) $(JAX_FAST) JAX_COMPILATION_CACHE_DIR=$(JAX_CACHE) \
	JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
# The installs, into .venv and .venv-oldest: uv (bootstrapped by pip; the dev extra lists it
# too) with --compile-bytecode, since uv writes no bytecode by default and this machine's
# environment sets PYTHONDONTWRITEBYTECODE=1 (see `bytecode`): without it each process compiled
# TensorFlow's imports again (test-oldest: 425 s -> 395 s). A fresh install of .venv took 29 s
# against pip's 82 s, both without a cache (2026-12-07). PyTorch's CPU wheel comes from the
# wheels folder pip's configuration names, so pip installs it.
UV_INSTALL := $(VENV)/bin/uv pip install -q --compile-bytecode
INSTALL    := $(UV_INSTALL) -p $(PY)
# PyTorch, installed into .venv for test-torch and test-slow (the CPU wheel where pip's config has one).
TORCH       := torch==2.13.0
TORCH_STAMP := $(VENV)/.torch-installed
# Playwright (the `screenshots` extra), installed into .venv for test-slow and the screenshots.
CHROMIUM_STAMP := $(VENV)/.chromium-installed
# mkdocs and its plugins, installed into .venv for `make docs`.
DOCS_STAMP  := $(VENV)/.docs-installed
# The oldest versions pyproject.toml allows (`make test-oldest`): a venv of its own.
OLDEST    := .venv-oldest
# Layer test files whose subject is the library's own arithmetic and loops (beam reordering
# against a whole-cache gather, the numeric regimes, the samplers' strictness, the
# documentation's and examples' scripts): they call the Keras APIs that the files run on the
# lower bounds call too, and run on the newest TensorFlow, JAX and PyTorch.
NOT_ON_OLDEST := $(addprefix --ignore=tests/,test_beam_reorder.py test_docs_examples.py \
	test_mechanisms_regimes.py test_examples.py test_samplers_strict.py)
OLDEST_PY := $(OLDEST)/bin/python

.PHONY: bytecode test test-tf test-jax test-torch test-slow postgres chromium test-oldest dist docs lint config-schema format demo ui bench mutate clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q uv
	$(INSTALL) -e ".[experiments,dev]"
	touch $(STAMP)

test: $(STAMP) bytecode
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(MAKE) --no-print-directory test-tf
	$(MAKE) --no-print-directory test-jax
	$(MAKE) --no-print-directory test-torch

# This machine's environment (CI's is a machine like it) sets PYTHONDONTWRITEBYTECODE=1: uv
# (--compile-bytecode) writes the dependencies' bytecode as it installs them, but not an
# editable install's, so every short process of the tests compiled the project's modules
# again (all 209 files: ~1 s of CPU). Python still reads bytecode written here, and ignores
# it once a source changes.
bytecode: $(STAMP)
	$(PY) -m compileall -q keras_attn_rnn experiments

# `make test`: everything but the tests marked slow, on TensorFlow; the layer tests on JAX, PyTorch.
test-tf: $(STAMP)
	KERAS_BACKEND=tensorflow $(ONE_THREAD) $(PYTEST) -n 2 -m "not slow" --durations=10 tests

test-jax: $(STAMP)
	rm -rf $(JAX_CACHE)
	KERAS_BACKEND=jax $(COMPILE_ONCE) $(PYTEST) -n 2 -m "layers and not slow" tests

$(TORCH_STAMP): $(STAMP)
	$(PY) -m pip install -q $(TORCH)
	touch $(TORCH_STAMP)

test-torch: $(TORCH_STAMP)
	KERAS_BACKEND=torch $(ONE_THREAD) $(PYTEST) -n 2 -m "layers and not slow" tests

# The tests marked slow (CI runs them after `make test`): whole processes run, killed and
# resumed, real `mlflow server`/`models serve` processes, fresh installs, distribution,
# the benchmark suite, the MLflow UI in headless Chromium. Needs torch: tests/test_cross_backend.py
# loads .keras files on JAX and torch.
test-slow: $(TORCH_STAMP) $(DOCS_STAMP) postgres chromium bytecode
	rm -rf $(JAX_CACHE)
	KERAS_BACKEND=tensorflow $(COMPILE_ONCE) $(PYTEST) -n 2 --dist loadgroup -m slow --durations=20 tests
	# the text models on JAX and on PyTorch, one process each, side by side on the two cores
	KERAS_BACKEND=jax $(COMPILE_ONCE) $(PYTEST) tests/test_text_models.py & jax=$$!; \
	KERAS_BACKEND=torch $(COMPILE_ONCE) $(PYTEST) tests/test_text_models.py; torch=$$?; \
	wait $$jax && test $$torch = 0

# PostgreSQL's server programs (Debian's `postgresql`, installed when missing; needs root):
# tests/test_scaleout_tune.py starts a server of its own on 127.0.0.1 for `tune`'s workers.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql; }

# Headless Chromium driven by Playwright (tests/test_ui_attention_view.py, tools/screenshots.py):
# Debian's `chromium` (installed when missing; needs root; Playwright's own browser download is
# not used) and Playwright, the `screenshots` extra.
chromium: $(CHROMIUM_STAMP)
	@test -x /usr/bin/chromium || { \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

$(CHROMIUM_STAMP): $(STAMP)
	$(INSTALL) -e ".[experiments,dev,screenshots]"
	touch $(CHROMIUM_STAMP)

# The layer suite without its slow tests, one runner test, the baseline (scikit-learn) and tune's checks (Optuna)
# on the lower bounds of pyproject.toml (TensorFlow).
test-oldest: $(STAMP)
	rm -rf $(OLDEST)
	$(VENV)/bin/uv venv -q -p $(PY) $(OLDEST)
	$(PY) .ci/lower_bounds.py > $(OLDEST)/constraints.txt
	$(UV_INSTALL) -p $(OLDEST_PY) -c $(OLDEST)/constraints.txt \
		-e ".[experiments,plotting]" pytest pytest-xdist hypothesis
	$(VENV)/bin/uv pip list -q -p $(OLDEST_PY) | grep -iE "^(keras|tensorflow|mlflow|numpy|pydantic|optuna|scikit-learn|psycopg|filelock) "
	KERAS_BACKEND=tensorflow $(ONE_THREAD) $(OLDEST_PY) -m pytest -q -p no:cacheprovider -n 2 \
		-m "layers and not slow" $(NOT_ON_OLDEST) tests
	KERAS_BACKEND=tensorflow $(OLDEST_PY) -m pytest -q -p no:cacheprovider \
		"tests/test_experiments_runs.py::test_run_logs_everything[reverse]" \
		tests/test_baseline.py "tests/test_experiments_tune.py::test_a_bad_study_exits_2_before_anything_is_created"

# sdist + wheel in dist/, checked by twine; the wheel holds the library only.
dist: $(STAMP)
	rm -rf build dist keras_attn_rnn.egg-info
	$(PY) -m build -o dist
	$(VENV)/bin/twine check --strict dist/*
	$(PY) .ci/check_wheel.py dist/*.whl

$(DOCS_STAMP): $(STAMP)
	$(INSTALL) -e ".[docs]"
	touch $(DOCS_STAMP)

# The documentation site in site/ (mkdocs.yml: guides, results, the API reference from the
# docstrings, the configuration reference generated from the schema); any warning fails it.
# (NO_MKDOCS_2_WARNING: mkdocs-material's banner about its successor, not a build warning.)
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

demo: $(STAMP)
	$(PY) -m experiments run demo

ui: $(STAMP)
	$(PY) -m experiments ui

bench: $(STAMP)
	$(PY) -m experiments bench --out bench.json

# Mutation testing of the attention maths ([tool.mutmut] in pyproject.toml; slow, not in `make test`):
# each mutant of mechanisms/, samplers/, normalizers, losses and scores runs the tests that reach it.
mutate: $(STAMP)
	rm -rf mutants
	KERAS_BACKEND=tensorflow $(ONE_THREAD) $(VENV)/bin/mutmut run
	$(VENV)/bin/mutmut results

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

# experiments/config_schema.json, the table the commands check a config against before they
# import Keras (tests/test_config_precheck.py fails while it is stale).
config-schema: $(STAMP)
	$(PY) -m tools.config_schema

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) $(OLDEST) $(JAX_CACHE) mutants .pytest_cache .ruff_cache .import_linter_cache build dist site
