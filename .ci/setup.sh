#!/usr/bin/env bash
# Test setup for a fresh machine (Debian, Python 3.11, no GPU): system packages the tests use
# (Chromium for the report tests, PostgreSQL for the store tests), then a virtual environment with
# the pinned CPU build of torch first (a looser torch requirement would pull a multi-GB CUDA build)
# and bakeoff with every extra.
set -euo pipefail
cd "$(dirname "$0")/.."
# Not root: through `sudo -n` when that works without a password; else say what is missing (the tests that
# need it skip, and fail under BAKEOFF_CI=1, which .ci/run sets).
need=()
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
# The server binaries, not just postgresql-common's pg_ctlcluster (a client install brings that).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then as_root=(); elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    as_root=(sudo -n); else as_root=(missing); fi
  if ! command -v apt-get >/dev/null || [ "${as_root[*]}" = missing ]; then
    echo "setup.sh: cannot install ${need[*]} (needs apt-get and root or passwordless sudo): install them" \
         "by hand; the tests that need them skip, or fail when BAKEOFF_CI=1" >&2
  else
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip uv
.venv/bin/pip install -q torch==2.13.0
# The extras through uv: the same versions as pip resolves (checked: identical `pip freeze`), in 17 s instead
# of 47 s on the 2-core machine; uv keeps the torch installed above, which satisfies every requirement. With
# --compile-bytecode, as pip does: these machines set PYTHONDONTWRITEBYTECODE=1, so a module not compiled at
# install is compiled again by every process that imports it (without it the tests took 1817 s instead of
# 1151 s). pip, if uv fails.
.venv/bin/uv pip install -q --python .venv/bin/python --compile-bytecode -e '.[all]' || .venv/bin/pip install -q -e '.[all]'
# bakeoff itself is installed editable, so the line above compiled none of its modules, and with
# PYTHONDONTWRITEBYTECODE=1 every worker process compiled them from source again: 0.2 s of each worker's
# 0.75 s of bakeoff imports on the 2-core machine (stale bytecode is never used: Python checks the source).
.venv/bin/python -m compileall -q bakeoff
