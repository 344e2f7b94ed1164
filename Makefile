# One task runner. `make test` and `make demo` work on a fresh clone: they create .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench soak clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(VENV)/.bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(VENV)/.bench

demo: $(STAMP)
	$(BIN)/python -m agent.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The user docs and the API reference generated from the docstrings; warnings are errors.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

test: lint docs
	$(BIN)/pytest

soak: $(STAMP)
	# 50x the examples and 10x the kills: far past the 300 s per-test timeout of `make test`.
	HYPOTHESIS_PROFILE=soak EVENTLOG_SOAK=1 $(BIN)/pytest --timeout=7200

bench: $(VENV)/.bench
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks peers

clean:
	rm -rf $(VENV)
