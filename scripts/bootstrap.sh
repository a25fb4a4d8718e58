#!/usr/bin/env bash
# Create .venv at the repo root and install quorumlake with everything it needs to run and test.
# Versions are pinned by constraints.txt (pip -c), so a fresh clone installs exactly what CI tested;
# `--unpinned` resolves from pyproject.toml alone (used by `make constraints` to re-pin after an upgrade).
# Then Spark is prepared once per machine and version: Delta's JVM jars are fetched from Maven Central and cached,
# and a JVM class archive is built so that every later Spark start is faster (pipelines/session.py, `prepare`).
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
if [ "${1:-}" = "--unpinned" ]; then
  pins=()
  tooling=(--upgrade pip setuptools wheel)
  unset PIP_CONSTRAINT
else
  pins=(-c constraints.txt)
  tooling=(pip setuptools wheel)
  # PIP_CONSTRAINT also pins the isolated build environment of the editable install (setuptools, wheel).
  export PIP_CONSTRAINT="$PWD/constraints.txt"
fi
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check "${pins[@]}")
"${pip[@]}" "${tooling[@]}"
# setuptools says, as information only, that an editable install should not be shadowed by same-named folders
PYTHONWARNINGS="ignore:Editable installation" "${pip[@]}" -e ".[dev]"
.venv/bin/python -m pipelines.session
