# One task runner. `make test` and `make demo` work on a fresh clone: they create .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench soak clean e2e-audit

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
