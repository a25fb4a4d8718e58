# The README's two commands are `make demo` and `make test`; each installs everything it needs first.
.PHONY: install demo test unit lint constraints clean

install:
	bash scripts/bootstrap.sh

demo: install
	.venv/bin/quorumlake demo

test: install lint
	bash scripts/install-browser.sh
	.venv/bin/python -m pytest

unit: install
	.venv/bin/python -m pytest tests/unit

# ruff's rules are in pyproject.toml ([tool.ruff.lint]); `ruff check --fix` fixes the safe ones.
lint: install
	.venv/bin/ruff check .

# Re-pin every installed version after a deliberate upgrade (edit pyproject.toml, then `make constraints`).
constraints:
	bash scripts/bootstrap.sh --unpinned
	.venv/bin/python -m pip freeze --exclude-editable --all | grep -v -i '^quorumlake' | LC_ALL=C sort -f \
	  | sed '1i # Pinned versions of every package `scripts/bootstrap.sh` installs (pip -c). Regenerate: make constraints' \
	  > constraints.txt

clean:
	rm -rf lakehouse .pytest_cache build dist *.egg-info
