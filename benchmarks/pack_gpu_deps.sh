#!/usr/bin/env bash
# Prepare what the lent H200 lacks, for benchmarks/h200_session.sh (run here, in the repo root):
#   .gpu/      IREE 3.13 repacked (copied from ../shared/gpu), 57 MiB
#   .gpudeps/  pydantic, pydantic-core, annotated-types, typing-inspection and SQLAlchemy (its optional C
#              extensions dropped, the pure-Python fallback used) for CPython 3.12, and pytest (with pluggy,
#              iniconfig, packaging, pytest-timeout; the image has Pygments) for the GPU tests, zipped: about 5.5 MiB
# Both are git-ignored through .git/info/exclude and travel with `carry: [".gpu", ".gpudeps"]` (plus a
# clean copy of the tree if the working tree has uncommitted work: see the closing notes of issue 4).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gpu/' .git/info/exclude || echo '/.gpu/' >> .git/info/exclude
grep -qx '/.gpudeps/' .git/info/exclude || echo '/.gpudeps/' >> .git/info/exclude
mkdir -p .gpu && cp -r ../shared/gpu/* .gpu/ && chmod -R u+w .gpu
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp/whl" \
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 sqlalchemy==2.1.9 \
  pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pytest-timeout==2.4.0
mkdir "$tmp/site" && (cd "$tmp/site" && for w in "$tmp"/whl/*.whl; do python3 -m zipfile -e "$w" .; done \
  && find . -path '*sqlalchemy*' -name '*.so' -delete && rm -f ./*.dist-info/RECORD)
mkdir -p .gpudeps && rm -f .gpudeps/pydeps.zip && (cd "$tmp/site" && python3 -m zipfile -c "$OLDPWD/.gpudeps/pydeps.zip" .)
rm -rf "$tmp"
du -sh .gpu .gpudeps
