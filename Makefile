# The README's two commands are `make demo` and `make test`; each installs everything it needs first.
.PHONY: install demo test unit live lint clean

install:
	bash scripts/bootstrap.sh

demo: install
	.venv/bin/quorumlake demo

# The live Kafka test runs after the rest (-s: its log names the Kafka version). pytest's exit code 5 (no test
# collected) fails the target like any other non-zero code.
test: install
	bash scripts/install-browser.sh
	.venv/bin/python -m pytest -m "not live_kafka"
	.venv/bin/python -m pytest -m live_kafka -s tests/live

live: install
	.venv/bin/python -m pytest -m live_kafka -s tests/live

unit: install
	.venv/bin/python -m pytest tests/unit

clean:
	rm -rf lakehouse .pytest_cache build dist *.egg-info
