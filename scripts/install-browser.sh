#!/usr/bin/env bash
# The report test drives Debian's chromium headless. Install it when missing and we may (root with apt-get);
# otherwise that one test skips and says why.
set -uo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "[quorumlake] installing Debian's chromium for the report test"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
    || echo "[quorumlake] could not install chromium; the browser test will skip"
else
  echo "[quorumlake] chromium not found and not root: the browser test will skip (apt-get install chromium)"
fi
exit 0
