# The README's two commands are `make demo` and `make test`; each installs everything it needs first.
.PHONY: install demo test unit live lint constraints clean

install:
	bash scripts/bootstrap.sh

demo: install
	.venv/bin/quorumlake demo

# Lint, then every test (scripts/test.sh): the live Kafka test runs beside the rest, whose files are spread over one
# worker per core (TEST_WORKERS=0: all in one process), slowest first. pytest's exit code 5 (no test collected) fails
# the target like any other non-zero code.
test: install lint
	bash scripts/install-browser.sh
	bash scripts/test.sh

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
