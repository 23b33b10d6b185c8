# Two entry points for a fresh machine: `make demo` (the tour) and `make test` (the suite).
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
TRITON_WHEEL := nvidia-pytriton==0.5.0

.PHONY: demo test unit bench serve lab image docker-engine clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[test]'
	# --no-deps: the wheel's own pins would downgrade JupyterLab; labkit only needs its server files.
	$(BIN)/python -m pip install -q --no-deps $(TRITON_WHEEL)
	touch $@

demo: $(BIN)/.installed
	$(BIN)/labkit demo --json demo.json

test: $(BIN)/.installed
	$(BIN)/python -m pytest --nbval

unit: $(BIN)/.installed  # the millisecond tests of pure functions (tests/unit), no server
	$(BIN)/python -m pytest tests/unit

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
