#!/usr/bin/env bash
# `make test`'s tests, on an installed venv: the live Kafka test (tests/live) and the rest at the same time.
#
# The rest runs on one pytest worker per core (TEST_WORKERS=0: all in one process), each test file whole on one worker
# (a module's shared warehouse, demo fleet or Spark Connect server is built once), in the order tests/conftest.py gives
# (slowest files first: --no-loadscope-reorder, or pytest-xdist hands out the files with the most tests first). The
# 15 slowest tests are listed at the end.
#
# The live test runs beside it, not after it: for most of its Kafka phases its cluster leaves the cores ~60 % idle
# (waiting for elections, ISR changes, lag to pass the SLO), which the other workers fill. Its output (-s: the log
# names the Kafka version and each phase) goes to a file, printed once both are done, so the two never interleave.
# The exit code is the first non-zero of the two (pytest's 5, no test collected, fails like any other).
set -uo pipefail
cd "$(dirname "$0")/.."
workers="${TEST_WORKERS:-auto}"
live_log="$(mktemp "${TMPDIR:-/tmp}/quorumlake-live.XXXXXX")"
trap 'rm -f "$live_log"' EXIT

# -p no:cacheprovider: the two processes would otherwise both rewrite .pytest_cache at the end
.venv/bin/python -m pytest -m live_kafka -s -p no:cacheprovider tests/live >"$live_log" 2>&1 &
live_pid=$!
# an interrupted `make test` stops the live test's cluster too (its fixture closes every node)
trap 'kill -INT "$live_pid" 2>/dev/null; wait "$live_pid" 2>/dev/null; rm -f "$live_log"; exit 130' INT TERM

.venv/bin/python -m pytest -m "not live_kafka" -n "$workers" --dist loadfile --no-loadscope-reorder --durations=15
rest=$?

wait "$live_pid"
live=$?
echo
echo "---- the live Kafka test (tests/live, run beside the rest): exit $live ----"
cat "$live_log"
if [ "$rest" -ne 0 ]; then
  exit "$rest"
fi
exit "$live"
