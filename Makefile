# Two entry points for a fresh machine: `make demo` (the tour) and `make test` (the suite).
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
TRITON_WHEEL := nvidia-pytriton==0.5.0

.PHONY: demo test bench serve lab image docker-engine clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[test]'
	# --no-deps: the wheel's own pins would downgrade JupyterLab; labkit only needs its server files.
	$(BIN)/python -m pip install -q --no-deps $(TRITON_WHEEL)
	# perf_analyzer 23.12 and its two libraries into labkit's cache (labkit also does this on first use)
	$(BIN)/labkit setup
	touch $@

demo: $(BIN)/.installed
	$(BIN)/labkit demo --json demo.json

test: $(BIN)/.installed
	$(BIN)/python -m pytest --nbval

bench: $(BIN)/.installed
	$(BIN)/labkit bench --json bench.json

serve: $(BIN)/.installed
	$(BIN)/labkit serve model_repository

image: $(BIN)/.installed
	$(BIN)/labkit image build

docker-engine:
	.ci/docker-engine.sh

lab: $(BIN)/.installed
	$(BIN)/jupyter lab notebooks

clean:
	rm -rf $(VENV) demo.json bench.json
