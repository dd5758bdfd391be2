# The two commands a newcomer needs: `make run` and `make test`.
# Each creates its own virtual environment (.venv) and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv run test lint bench clean infra-up infra-down infra-status

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
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
# pytest against them, and stop them again whatever happened; the exit code is pytest's
# (or lint's / infra up's when those fail first). PYTEST_ARGS passes options to pytest.
PYTEST_ARGS ?=
test: $(STAMP) lint
	@trap '$(BIN)/punto-banco infra down' EXIT; trap 'exit 130' INT TERM; \
	settings="$$($(BIN)/punto-banco infra up)" && eval "$$settings" && \
	$(BIN)/pytest $(PYTEST_ARGS)

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

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
