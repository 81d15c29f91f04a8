# nfvperf — the two commands are `make demo` and `make test` (see README.md).
PY         ?= python3
TGEN_BUILD ?= tgen/build
PYTEST_ARGS ?=

.PHONY: all deps build tgen l3fwd test test-c test-py demo bench lint clean

all: build

deps:
	bash scripts/install-deps.sh

build: tgen l3fwd

tgen:
	@if [ ! -f $(TGEN_BUILD)/build.ninja ]; then meson setup $(TGEN_BUILD) tgen --buildtype=release; fi
	ninja -C $(TGEN_BUILD)

# DPDK's l3fwd example (dut: l3fwd) from dpdk-doc's sources, into build/l3fwd/
l3fwd:
	bash scripts/build-l3fwd.sh

# The whole suite: lint, C unit tests of the generator, then pytest (unit, integration as root, e2e).
test: deps build lint test-c test-py

test-c: tgen
	meson test -C $(TGEN_BUILD) --print-errorlogs

# The pure and sim tests (unit, e2e) run on both cores (pytest-xdist, one module per worker);
# so do the integration tests marked no_polling (namespaces, sshd, iperf3, ansible: nothing
# busy-polls); the other integration tests, whose DUTs and generator busy-poll and are pinned,
# run one at a time.  The two -m expressions are complements: every test runs in one of them
# (tests/unit/test_integration_passes.py checks both this and the marks).
# Each pass writes its skips to $(SKIP_DIR) (tests/skipcheck.py's pytest hooks); the last step
# fails on any skip not listed, with its reason, in tests/expected_skips.txt.  Under CI (CI=true)
# the serial pass checks for leaks strictly: it runs alone, so anything left behind is its own.
PYTEST_WORKERS ?= 2
SKIP_DIR ?= build/pytest-skips
LEAK_STRICT ?= $(if $(filter true 1,$(CI)),1,)

test-py:
	rm -rf $(SKIP_DIR)
	NFVPERF_SKIP_REPORT=$(SKIP_DIR)/unit-e2e.jsonl \
	  $(PY) -m pytest -q -rs --durations=10 -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS) tests/unit tests/e2e
	NFVPERF_SKIP_REPORT=$(SKIP_DIR)/integration-no-polling.jsonl \
	  $(PY) -m pytest -q -rs --durations=10 -n $(PYTEST_WORKERS) --dist loadfile -m "no_polling" $(PYTEST_ARGS) tests/integration
	NFVPERF_SKIP_REPORT=$(SKIP_DIR)/integration-serial.jsonl NFVPERF_LEAK_STRICT=$(LEAK_STRICT) \
	  $(PY) -m pytest -q -rs --durations=40 -m "not no_polling" $(PYTEST_ARGS) tests/integration
	$(PY) tests/skipcheck.py tests/expected_skips.txt \
	  $(SKIP_DIR)/unit-e2e.jsonl $(SKIP_DIR)/integration-no-polling.jsonl $(SKIP_DIR)/integration-serial.jsonl

# Sets up everything and runs a real benchmark on the embedded default topology.
demo: deps build
	$(PY) -m nfvperf demo

bench: deps build
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# ruff (pyflakes, pycodestyle, bugbear) and mypy on src/, both configured in pyproject.toml
lint:
	$(PY) -m ruff check src
	$(PY) -m mypy

clean:
	rm -rf $(TGEN_BUILD) build/l3fwd
	$(PY) -m nfvperf cleanup || true
