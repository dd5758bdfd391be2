# The two commands a newcomer needs: `make run` and `make test`.
# Each creates its own virtual environment (.venv) and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv run test test-fast lint bench clean infra-up infra-down infra-status constraints

$(STAMP): pyproject.toml contracts/pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e ./contracts -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# `make run`: the whole system with a demo table (punto-banco up); RUN_ARGS passes options.
RUN_ARGS ?=
run: $(STAMP)
	$(BIN)/punto-banco up $(RUN_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# `make test`: lint, then start the local Kafka and PostgreSQL (services/dev/infra), run
# pytest against them, and stop them again whatever happened. Unit and integration tests run
# on TEST_WORKERS pytest-xdist workers (2, CI's, on two cores: each its own session, topic
# prefix and database; 0 runs them in this process), then e2e on as many, a file per worker at
# a time (its own topic prefix, data folder, database and free HTTP ports per test; the
# `up` tests of one file never overlap). The exit code is the first failing run's (or lint's /
# infra up's when those fail first; a run that selects no test counts as passed). PYTEST_ARGS
# passes options (not paths) to both runs.
PYTEST_ARGS ?=
TEST_WORKERS ?= 2
test: $(STAMP) lint
	@trap '$(BIN)/punto-banco infra down' EXIT; trap 'exit 130' INT TERM; \
	settings="$$($(BIN)/punto-banco infra up)" && eval "$$settings" || exit $$?; rc=0; \
	for run in "-n $(TEST_WORKERS) tests/unit tests/integration" "-n $(TEST_WORKERS) --dist loadfile tests/e2e"; do \
	  $(BIN)/pytest $$run $(PYTEST_ARGS); code=$$?; \
	  if [ $$rc = 0 ] && [ $$code != 5 ]; then rc=$$code; fi; \
	done; exit $$rc

# `make test-fast`: the unit tier alone (tests/unit: no Kafka, no PostgreSQL, no I/O, about a
# minute); it starts no server and needs none. One process: the tier is CPU-bound, two
# workers on two cores are no faster.
test-fast: $(STAMP)
	$(BIN)/pytest -p no:xdist tests/unit $(PYTEST_ARGS)

# `make bench`: start the local Kafka and PostgreSQL, run every benchmark group against
# them (`punto-banco bench`; BENCH_ARGS, e.g. BENCH_ARGS="--quick --write"), stop them again.
BENCH_ARGS ?= --write
bench: $(STAMP)
	@trap '$(BIN)/punto-banco infra down' EXIT; trap 'exit 130' INT TERM; \
	settings="$$($(BIN)/punto-banco infra up)" && eval "$$settings" && \
	$(BIN)/punto-banco bench $(BENCH_ARGS)

infra-up: $(STAMP)
	@$(BIN)/punto-banco infra up

infra-down: $(STAMP)
	@$(BIN)/punto-banco infra down

infra-status: $(STAMP)
	@$(BIN)/punto-banco infra status

# `make constraints`: pin every dependency at the newest versions pyproject.toml allows, in a
# throw-away environment (then run `make test` before committing constraints.txt).
constraints:
	rm -rf .venv-constraints && $(PYTHON) -m venv .venv-constraints
	.venv-constraints/bin/pip install -q --upgrade pip
	.venv-constraints/bin/pip install -q ./contracts '.[dev]'
	{ sed -n '1,2p' constraints.txt; .venv-constraints/bin/pip freeze --exclude-editable \
	  | grep -v '^punto-banco'; } > constraints.txt.new && mv constraints.txt.new constraints.txt
	rm -rf .venv-constraints

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
