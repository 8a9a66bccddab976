# pinledger: `make help` lists the targets. `make check` is what CI runs.
PYTHON ?= python3
PYTEST_FLAGS ?=

.DEFAULT_GOAL := help
.PHONY: help install system-packages stack-up stack-down stack-status run demo test test-unit test-contract test-integration test-deploy lint types check docs docs-build bench wheel image clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

# Strict editable mode: setuptools links every file of the package into
# build/__editable__.*/pinledger/, the tree mypy checks (docs/decisions/0009-package-layout.md).
# Run it again after adding, moving or removing a module
# (tests/unit/test_import_names.py says so).
install: ## install pinledger and its dev tools into the current Python
	$(PYTHON) -m pip install -q -e '.[dev]' --config-settings editable_mode=strict

system-packages: ## the Debian packages every test needs (stack/install.sh: only what is missing)
	bash stack/install.sh

stack-up: ## start the local Kafka, Postgres and MariaDB (idempotent)
	bash stack/stack.sh up

stack-down: ## stop the local Kafka, Postgres and MariaDB
	bash stack/stack.sh down

stack-status: ## is the local stack running?
	bash stack/stack.sh status

run: install stack-up demo ## set everything up and run the demo

demo: ## run the demo against the running stack
	$(PYTHON) -m pinledger demo

test: install system-packages stack-up ## run every test against the real Kafka and Postgres
	$(PYTHON) -m pytest --cov=ledger --cov=projections --cov=service --cov=cli --cov=dashboard --cov=client --cov-report=term $(PYTEST_FLAGS)

test-unit: ## the pure tests only (no servers needed)
	$(PYTHON) -m pytest tests/unit $(PYTEST_FLAGS)

test-contract: ## the port contract suites, on the real adapters and on the fakes
	$(PYTHON) -m pytest tests/contract $(PYTEST_FLAGS)

test-integration: ## the tests against the real servers
	$(PYTHON) -m pytest tests/integration $(PYTEST_FLAGS)

test-deploy: ## the Helm chart (helm lint/template), the alert rules (promtool check/test rules; both tools built with Go once) and the systemd units
	$(PYTHON) -m pytest tests/deploy $(PYTEST_FLAGS)

# The shell scripts: the stack's, CI's, and any other *.sh in the repository.
SHELL_SCRIPTS = $(sort $(wildcard stack/*.sh) .ci/run $(shell git ls-files '*.sh' 2>/dev/null))

lint: ## ruff, and shellcheck on the shell scripts (installed if missing)
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	bash stack/install.sh shellcheck
	shellcheck -x $(SHELL_SCRIPTS)

types: ## mypy, strict
	$(PYTHON) -m mypy

check: install lint types test ## lint + types + tests: what CI runs

# The manual: mkdocs.yml, pages in docs/. Material for MkDocs prints a banner about its
# successor on every run; NO_MKDOCS_2_WARNING silences it (it is not a build warning).
MKDOCS = NO_MKDOCS_2_WARNING=1 $(PYTHON) -m mkdocs

docs: ## build the manual and serve it at http://127.0.0.1:8000, rebuilt on every edit (mkdocs serve)
	$(MKDOCS) serve

docs-build: ## build the manual into site/, strictly: a broken link or anchor, or a page outside the nav, fails
	$(PYTHON) docs/generate.py --check
	$(MKDOCS) build --strict

# The benchmark's peers, comma-separated: pgqueuer, river (built with Go on first use),
# none. Unset: PgQueuer, and River where Go is installed (bench --help).
PEERS ?=

bench: ## the benchmark: PgQueuer, and River where Go is present; PEERS=pgqueuer for PgQueuer only (docs/performance.md)
	$(PYTHON) -m pip install -q -e '.[bench]' --config-settings editable_mode=strict
	$(PYTHON) -m bench $(if $(PEERS),--peer $(PEERS))

wheel: ## build the wheel into dist/ (installable anywhere; see tests/integration/test_wheel.py)
	# setuptools reuses build/lib: a module deleted since the last build would ship.
	rm -rf build/lib build/bdist.*
	$(PYTHON) -m pip wheel --no-deps -q -w dist .

image: ## build the container image pinledger:<version> and :latest (podman, or docker where it works; docs/container.md)
	PYTHON=$(PYTHON) bash deploy/image/build.sh

# build/__editable__.* stays: it is the editable install (make install).
clean: ## remove caches and build output
	rm -rf .pytest_cache .mypy_cache .ruff_cache .hypothesis .coverage dist site *.egg-info
	if [ -d build ]; then find build -mindepth 1 -maxdepth 1 ! -name '__editable__.*' -exec rm -rf {} +; fi
