# cardrules build entry points. A fresh machine needs only Python 3.11 and make (and
# npm, for buf, in test, coverage and lint): every target bootstraps .venv from the
# hash-pinned requirements/dev.lock.

ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell command -v python3.11 >/dev/null 2>&1 && echo python3.11 || echo python3)
endif

VENV       := .venv
BIN        := $(VENV)/bin
VENV_STAMP := $(VENV)/.installed
# The directory .venv was made in: its scripts' #! lines and the editable installs'
# .pth files name it, so a copied checkout's .venv runs the other tree's code and a
# moved one's runs nothing. A .venv that names another directory (or none: made
# before this record) is made again here.
VENV_DIR   := $(VENV)/.directory
NODE_STAMP := node_modules/.installed
BUF        := node_modules/.bin/buf
# npm and buf keep their caches (and buf looks for its config) in .venv, not in HOME,
# which in containers is often unwritable (HOME=/ as non-root) or no directory
# (HOME=/dev/null): npm ci failed to mkdir $HOME/.npm, buf lint $HOME/.cache. Exported,
# so the buf that tests run finds them too; .venv is made before npm ci runs.
NPM_CACHE  := $(CURDIR)/$(VENV)/npm-cache
export BUF_CACHE_DIR ?= $(CURDIR)/$(VENV)/buf-cache
export BUF_CONFIG_DIR ?= $(CURDIR)/$(VENV)/buf-config

# Size knobs of the long tests: random games played (RANDOM_GAMES), the first one's
# seed (RANDOM_SEED) and the factor on every property/fuzz test's examples
# (FUZZ_SCALE); tests/sizes.py reads them
# from the environment, outside the server's CARDRULES_* variables.
RANDOM_GAMES ?= 300
RANDOM_SEED  ?= 0
FUZZ_SCALE   ?= 1
# Extra arguments for pytest, e.g. make test PYTEST_ARGS='-k deck -x'
PYTEST_ARGS  ?=
# Extra arguments for the server, e.g. make serve SERVE_ARGS='--workers 2'
SERVE_ARGS   ?=
# Extra arguments for the benchmark, e.g. make bench BENCH_ARGS='engine --quick'
BENCH_ARGS   ?=
# Extra arguments for pip-compile, e.g. make lock LOCK_ARGS=--upgrade
LOCK_ARGS    ?=

# The environment of every pip run: PIP_USER=0, as a PIP_USER=1 or a pip.conf's
# `user = true` made pip refuse to install into the venv ("Can not perform a '--user'
# install"). Not --isolated, which would drop an index mirror set in PIP_INDEX_URL.
# PYTHONWARNINGS empty: =error made the new venv's pip (23.2.1, which Python 3.11
# bundles) stop at its own "pkg_resources is deprecated" DeprecationWarning.
PIP_ENV := PIP_USER=0 PYTHONWARNINGS=

# cardrules-client, which pyproject.toml names, is on no index: pip-compile finds it
# as a wheel built from ./clients/python and, as the one "unsafe" package (which also
# pins pip and setuptools as any other), leaves it out of the locks, with a comment.
CLIENT_WHEEL := $(VENV)/client-wheel
PIP_COMPILE := $(PIP_ENV) CUSTOM_COMPILE_COMMAND="make lock" $(BIN)/pip-compile --quiet \
	--generate-hashes --unsafe-package cardrules-client --find-links $(CLIENT_WHEEL) \
	--strip-extras --no-emit-index-url --no-emit-find-links --all-build-deps $(LOCK_ARGS)

.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
.PHONY: help venv test coverage lint fmt serve bench lock generate clean FORCE

help: ## List targets
	@echo "Targets:"
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'
	@echo "Variables: PYTHON=$(PYTHON) (creates .venv; make clean first to change it) RANDOM_GAMES=$(RANDOM_GAMES) RANDOM_SEED=$(RANDOM_SEED) FUZZ_SCALE=$(FUZZ_SCALE) PYTEST_ARGS SERVE_ARGS BENCH_ARGS LOCK_ARGS"

venv: $(VENV_STAMP) ## Create/refresh .venv from requirements/dev.lock

# Rebuilt from scratch when the venv is missing, dev.lock changed or the venv was made
# in another directory; when only pyproject.toml changed, the lock is re-applied and
# the project reinstalled. PYTHON counts only in a rebuild: a venv is kept whatever
# PYTHON says (make clean to change it).
# pip check: a dependency pyproject.toml gained but the lock lacks (make lock) fails
# here, not at the first import of it. Before it (and before the installs into a venv
# kept), the venv's python must start: under LC_ALL=C or POSIX, Python 3.11 reads the
# editable installs' .pth files as ASCII and cannot start in a checkout whose path is
# not, which pip check's failure would have blamed on the lock.
ifneq ($(shell cat $(VENV_DIR) 2>/dev/null),$(CURDIR))
$(VENV_STAMP): FORCE
endif
VENV_STARTS = $(BIN)/python -c pass || { \
	echo "make: $(VENV)'s python cannot start (see above)" >&2; \
	case "$$LC_ALL" in C|POSIX) echo "make: under LC_ALL=$$LC_ALL, Python reads .pth files" \
		"as ASCII: if this checkout's path is not ASCII, run LC_ALL=C.UTF-8 make $(MAKECMDGOALS)" >&2;; \
	esac; exit 1; }
$(VENV_STAMP): requirements/dev.lock pyproject.toml
	@made_in="$$(cat $(VENV_DIR) 2>/dev/null)"; \
	if [ ! -x $(BIN)/python ] || [ -n "$(filter requirements/dev.lock,$?)" ] \
		|| [ "$$made_in" != "$(CURDIR)" ]; then \
		if ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then \
			echo "make: cardrules needs Python 3.11 or newer, and $(PYTHON) is" \
				"$$(command -v $(PYTHON) >/dev/null && $(PYTHON) --version 2>&1 || echo 'not found'):" \
				"make PYTHON=/path/to/python3.11" >&2; \
			exit 1; \
		fi; \
		if [ -x $(BIN)/python ] && [ "$$made_in" != "$(CURDIR)" ]; then \
			echo "this $(VENV) was made for $${made_in:-a directory it does not record}; making it again here"; \
		fi; \
		echo "creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version 2>&1))"; \
		rm -rf $(VENV) && $(PYTHON) -m venv $(VENV) \
			&& printf '%s\n' "$(CURDIR)" >$(VENV_DIR); \
	fi
	@$(VENV_STARTS)
	$(PIP_ENV) $(BIN)/python -m pip install -q --require-hashes --no-deps -r requirements/dev.lock
	$(PIP_ENV) $(BIN)/python -m pip install -q --no-deps --no-build-isolation -e ./clients/python -e .
	@$(VENV_STARTS)
	@$(PIP_ENV) $(BIN)/python -m pip check >/dev/null || { $(PIP_ENV) $(BIN)/python -m pip check >&2; \
		echo "make: requirements/dev.lock does not hold what pyproject.toml asks for: make lock" >&2; \
		exit 1; }
	@touch $@

# buf (proto lint) comes pinned from the npm registry via package-lock.json.
$(NODE_STAMP): package.json package-lock.json | $(VENV_STAMP)
	@command -v npm >/dev/null 2>&1 || { echo "make: npm (Node.js) is needed for buf lint" >&2; exit 1; }
	npm_config_cache=$(NPM_CACHE) npm ci --no-audit --no-fund --loglevel=error
	@touch $@

test: $(VENV_STAMP) $(NODE_STAMP) ## buf lint + hadolint + ruff check + ruff format --check + mypy + pytest -n auto
	$(BUF) lint
	$(BIN)/hadolint Dockerfile
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	RANDOM_GAMES=$(RANDOM_GAMES) RANDOM_SEED=$(RANDOM_SEED) FUZZ_SCALE=$(FUZZ_SCALE) $(BIN)/pytest -n auto $(PYTEST_ARGS)

coverage: $(VENV_STAMP) $(NODE_STAMP) ## pytest with line coverage of engine/ and service/, servers started by tests included
	RANDOM_GAMES=$(RANDOM_GAMES) RANDOM_SEED=$(RANDOM_SEED) FUZZ_SCALE=$(FUZZ_SCALE) $(BIN)/pytest -n auto --cov --cov-report=term-missing:skip-covered $(PYTEST_ARGS)

lint: $(VENV_STAMP) $(NODE_STAMP) ## buf lint + hadolint + ruff check + ruff format --check + mypy
	$(BUF) lint
	$(BIN)/hadolint Dockerfile
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt: $(VENV_STAMP) ## ruff format + ruff check --fix
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

serve: $(VENV_STAMP) ## Run the service on its embedded defaults (gRPC :50051, HTTP :8080, metrics :9464); flags in SERVE_ARGS
	@# Not echoed: SERVE_ARGS may hold --state-keys.
	@$(BIN)/cardrules serve $(SERVE_ARGS)

bench: $(VENV_STAMP) ## Run the benchmarks: python -m bench with BENCH_ARGS (engine, grpc, http, overload, soak)
	$(BIN)/python -m bench $(BENCH_ARGS)

lock: $(VENV_STAMP) ## Regenerate requirements/runtime.lock and requirements/dev.lock
	@rm -rf $(VENV)/locks-before $(CLIENT_WHEEL) && mkdir $(VENV)/locks-before
	@cp -p requirements/runtime.lock requirements/dev.lock $(VENV)/locks-before/
	$(PIP_ENV) $(BIN)/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir $(CLIENT_WHEEL) ./clients/python
	$(PIP_COMPILE) --output-file requirements/runtime.lock pyproject.toml
	$(PIP_COMPILE) --extra dev --constraint requirements/runtime.lock \
		--output-file requirements/dev.lock pyproject.toml
	@# An unchanged lock keeps its time: a newer dev.lock rebuilds .venv from scratch.
	@for lock in runtime.lock dev.lock; do \
		if cmp -s $(VENV)/locks-before/$$lock requirements/$$lock; then \
			touch -r $(VENV)/locks-before/$$lock requirements/$$lock; \
		fi; \
	done; rm -rf $(VENV)/locks-before $(CLIENT_WHEEL)

generate: $(VENV_STAMP) ## Regenerate from proto/: the Python code in clients/python/src and the OpenAPI document
	$(BIN)/python scripts/generate_protos.py
	$(BIN)/python scripts/generate_openapi.py

clean: ## Remove .venv and tool caches
	rm -rf $(VENV) node_modules .mypy_cache .ruff_cache .pytest_cache .hypothesis .coverage .coverage.* \
		htmlcov dist build clients/python/dist clients/python/build
	find . -path ./.git -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

FORCE:
