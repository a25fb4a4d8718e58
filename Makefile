# The README's two commands are `make demo` and `make test`; each installs everything it needs first.
.PHONY: install demo test unit live lint constraints clean

install:
	bash scripts/bootstrap.sh

demo: install
	.venv/bin/quorumlake demo

# Lint, then every test, on one worker per core (TEST_WORKERS=0: all in this one process), each test file whole on one
# worker so that a module's shared warehouse, demo fleet or Spark Connect server is built once, and in the order
# tests/conftest.py gives (slowest files first, the live Kafka test before them: --no-loadscope-reorder, or
# pytest-xdist hands out the files with the most tests first); the 15 slowest tests are listed at the end, and the live
# Kafka test's log (the Kafka version it ran) after them. pytest's exit code 5 (no test collected) fails the target
# like any other non-zero code.
TEST_WORKERS ?= auto
test: install lint
	bash scripts/install-browser.sh
	.venv/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

live: install
	.venv/bin/python -m pytest -m live_kafka -s tests/live

unit: install
	.venv/bin/python -m pytest tests/unit

# ruff's rules are in pyproject.toml ([tool.ruff.lint]); `ruff check --fix` fixes the safe ones, `ruff format .`
# formats (CI fails on unformatted code).
lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

# Re-pin every installed version after a deliberate upgrade (edit pyproject.toml, then `make constraints`).
constraints:
	bash scripts/bootstrap.sh --unpinned
	.venv/bin/python -m pip freeze --exclude-editable --all | grep -v -i -e '^quorumlake' -e '^uv==' | LC_ALL=C sort -f \
	  | sed '1i # Pinned versions of every package `scripts/bootstrap.sh` installs (pip -c). Regenerate: make constraints' \
	  > constraints.txt

clean:
	rm -rf lakehouse lakehouse-bench .pytest_cache build dist *.egg-info
