# The README's two commands are `make demo` and `make test`; each installs everything it needs first.
.PHONY: install demo test unit lint clean

install:
	bash scripts/bootstrap.sh

demo: install
	.venv/bin/quorumlake demo

test: install
	bash scripts/install-browser.sh
	.venv/bin/python -m pytest

unit: install
	.venv/bin/python -m pytest tests/unit

clean:
	rm -rf lakehouse .pytest_cache build dist *.egg-info
