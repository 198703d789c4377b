#!/usr/bin/env bash
# Test setup for a fresh machine (Debian, Python 3.11, no GPU): system packages the tests use
# (Chromium for the report tests, PostgreSQL for the store tests), then a virtual environment with
# the pinned CPU build of torch first (a looser torch requirement would pull a multi-GB CUDA build)
# and bakeoff with every extra.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  need=()
  command -v chromium >/dev/null || need+=(chromium)
  command -v pg_ctlcluster >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e '.[all]'
