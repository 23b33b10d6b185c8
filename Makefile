# Two entry points for a fresh machine: `make demo` (the tour) and `make test` (the suite).
# Participants of a workshop need neither the test tools nor Docker: `make lab`.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
TRITON_WHEEL := nvidia-pytriton==0.5.0

.PHONY: demo test lint unit bench bench-swarm serve lab doctor image docker-engine site clean

# The lab itself: labkit, JupyterLab and the real Triton 23.12.
$(BIN)/.lab: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e .
	# --no-deps: the wheel's own pins would downgrade JupyterLab; labkit only needs its server files.
	$(BIN)/python -m pip install -q --no-deps $(TRITON_WHEEL)
	# perf_analyzer 23.12 and its two libraries into labkit's cache (labkit also does this on first use)
	$(BIN)/labkit setup
	touch $@

# ... plus what the test suite needs (the site's packages too: tests/test_site.py builds it).
$(BIN)/.installed: $(BIN)/.lab
	$(BIN)/python -m pip install -q -e '.[test,docs]'
	touch $(BIN)/.docs
	# nvcc and cudart (CUDA 13.0 wheels, about 105 MB, once): the tests build a CUDA backend for real
	$(BIN)/labkit setup --cuda
	# the real models' environments (examples/real_models: PP-OCRv4 and silero-vad with onnxruntime; about
	# 700 MB in labkit's cache, once): the lesson and its tests then serve them offline
	$(BIN)/labkit setup --real-models
	touch $@

# The course as a website: Sphinx, MyST-NB and sphinx-book-theme (the docs extra).
$(BIN)/.docs: $(BIN)/.lab
	$(BIN)/python -m pip install -q -e '.[docs]'
	touch $@

demo: $(BIN)/.lab
	$(BIN)/labkit demo --json demo.json

# The suite on parallel workers (pytest-xdist): a file's tests (a notebook's cells) stay together in one worker,
# and the swarm's test files together (tests/conftest.py's scheduler: one swarm for all of them).
# Most of its time is spent waiting for servers, containers, hubs and kernels, which overlap well on 2 cores.
# Then the browser tests, alone: Chromium aborts a page's requests when another test changes the machine's
# networks (a container started, a Docker network made). TEST_REPORT=PREFIX writes PREFIX-*.xml (JUnit).
TEST_WORKERS ?= 2
test: $(BIN)/.installed lint
	$(BIN)/python -m pytest --nbval -n $(TEST_WORKERS) --dist loadfile -m "not browser" $(if $(TEST_REPORT),--junitxml=$(TEST_REPORT)-parallel.xml)
	$(BIN)/python -m pytest -m browser $(if $(TEST_REPORT),--junitxml=$(TEST_REPORT)-browser.xml)

lint: $(BIN)/.installed  # ruff (lint and format) on labkit/ and tests/, mypy on labkit/ (pyproject.toml says how)
	$(BIN)/ruff check labkit tests
	$(BIN)/ruff format --check labkit tests
	$(BIN)/mypy

unit: $(BIN)/.installed  # the millisecond tests of pure functions (tests/unit), no server
	$(BIN)/python -m pytest tests/unit

bench: $(BIN)/.lab
	$(BIN)/labkit bench --json bench.json

# `labkit room bench --swarm` on a three-engine swarm built on this machine in network namespaces, then removed
# (root, ip and dockerd; the lab image built here first): PARTICIPANTS=20, NOTEBOOK=17_real_models.ipynb.
PARTICIPANTS ?= 6
NOTEBOOK ?= 01_python_backend.ipynb
bench-swarm: $(BIN)/.installed
	$(BIN)/python tests/bench_swarm.py --participants $(PARTICIPANTS) --notebook $(NOTEBOOK) --json bench-swarm-$(PARTICIPANTS).json

serve: $(BIN)/.lab
	$(BIN)/labkit serve model_repository

image: $(BIN)/.lab
	$(BIN)/labkit image build

docker-engine:
	.ci/docker-engine.sh

site: $(BIN)/.docs  # the course as a static website in site/html/ (offline; warnings are errors); see the README
	$(BIN)/python -m sphinx -M html docs site -W --keep-going -q
	@echo "site: open site/html/index.html"

lab: $(BIN)/.lab
	$(BIN)/labkit setup --real-models
	$(BIN)/labkit doctor
	$(BIN)/jupyter lab notebooks

doctor: $(BIN)/.lab
	$(BIN)/labkit doctor

clean:
	rm -rf $(VENV) demo.json bench.json site
