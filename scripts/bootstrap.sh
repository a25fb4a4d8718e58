#!/usr/bin/env bash
# Create .venv at the repo root and install quorumlake with everything it needs to run and test.
# Delta's JVM jars are fetched from Maven Central by the first Spark start and cached (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 10):
    sys.exit(f"quorumlake needs Python >= 3.10, found {sys.version.split()[0]}")
PY
command -v java >/dev/null || { echo "quorumlake needs Java 17 (java not found on PATH)" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[dev]"
