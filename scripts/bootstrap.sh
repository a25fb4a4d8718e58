#!/usr/bin/env bash
# Create .venv at the repo root and install quorumlake with everything it needs to run and test.
# Versions are pinned by constraints.txt (pip -c), so a fresh clone installs exactly what CI tested;
# `--unpinned` resolves from pyproject.toml alone (used by `make constraints` to re-pin after an upgrade).
# Then Spark is prepared once per machine and version: a first local start has Spark resolve Delta's JVM jars from
# Maven Central into its cache (pipelines/engine/local.py, `prepare`).
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
  # without pip: uv installs it with everything else (ensurepip would spend seconds of one core on it); where uv
  # cannot be installed, venv_pip adds it
  "$PYTHON" -m venv --without-pip .venv
fi
venv_pip() {
  .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip --upgrade --default-pip >/dev/null
}
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
# uv installs the same pinned versions as pip, several times faster (most of an install is PySpark's 400 MB); pip
# does it where uv cannot be installed.
UV_VERSION=0.13.9
have_uv() { [ "$(.venv/bin/uv --version 2>/dev/null | cut -d' ' -f2)" = "$UV_VERSION" ]; }
# into the venv by this Python's own pip (`--python`, pip >= 22.3), else by the venv's
install_uv() {
  "$PYTHON" -m pip --python .venv/bin/python install --quiet --disable-pip-version-check "uv==$UV_VERSION" 2>/dev/null \
    || { venv_pip && .venv/bin/python -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" 2>/dev/null; }
}
if [ -z "${QUORUMLAKE_NO_UV:-}" ] && { have_uv || install_uv; }; then
  if [ "${1:-}" = "--unpinned" ]; then
    uv_pins=(--upgrade)
  else
    uv_pins=(-c constraints.txt --build-constraint constraints.txt)
  fi
  # --compile-bytecode: the installed modules' bytecode is written once, here, as pip does by default (uv does not).
  # Without it every process compiles what it imports, each time where bytecode is not written back
  # (PYTHONDONTWRITEBYTECODE, as on CI machines): every run, test worker and Python UDF worker would spend about twice
  # the CPU on importing PySpark, pandas and Great Expectations.
  # PYSPARK_WHEEL: PyPI has PySpark as a source archive only (450 MB, nearly all of it jars, which are zip files
  # already); uv builds its wheel here, and setuptools would deflate every jar again (a wheel of the same size, for
  # seconds of one core in every new install). Stored, the build takes half the time. uv caches the built wheel under
  # these settings: the Connect test's venv installs PySpark from that cache with the same ones
  # (tests/e2e/test_connect.py).
  PYSPARK_WHEEL="pyspark:--build-option=--compression=stored"
  VIRTUAL_ENV="$PWD/.venv" .venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python \
    "${uv_pins[@]}" --config-settings-package "$PYSPARK_WHEEL" pip setuptools wheel -e ".[dev]"
else
  venv_pip
  pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check "${pins[@]}")
  "${pip[@]}" "${tooling[@]}"
  # setuptools says, as information only, that an editable install should not be shadowed by same-named folders
  PYTHONWARNINGS="ignore:Editable installation" "${pip[@]}" -e ".[dev]"
fi
# A venv installed before its bytecode was compiled at install (uv compiles only what it installs) gets it once.
if ! ls .venv/lib/python*/site-packages/pyspark/__pycache__/*.pyc >/dev/null 2>&1; then
  .venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    >/dev/null 2>&1 || true
fi
.venv/bin/python -m quorumlake.pipelines.engine.local
