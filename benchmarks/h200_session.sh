#!/usr/bin/env bash
# One device call on the lent H200 (see ../shared/GPU.md): install what the image lacks, measure the
# ceilings, validate the timer, cross-check IREE's timing, and run configs/h200.yaml. Records and logs go
# to $OUT. Prepare .gpu and .gpudeps here with benchmarks/pack_gpu_deps.sh. Usage (from the repo root on
# the GPU machine; carry .gpu and .gpudeps):
#   bash benchmarks/h200_session.sh [bakeoff run filters, e.g. -b inductor -b xla]
# H200_CONFIG names another config under the repo root (default configs/h200.yaml).
set -uo pipefail
R=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 .gpu/install_iree.py /tmp/site >/dev/null
python3 -c "import zipfile; zipfile.ZipFile('.gpudeps/pydeps.zip').extractall('/tmp/site')"
export PYTHONPATH=/tmp/site:$R PYTHONUNBUFFERED=1
[ -f "$R/REVISION" ] && export BAKEOFF_HARNESS_REV="$(cat "$R/REVISION")"  # a copy without .git
W=/tmp/bakeoff-work; mkdir -p "$W"; cd "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv
python3 -m bakeoff calibrate --dtype bfloat16 --dtype float32 2>&1 | tail -4
if [ -n "${VALIDATE:-}" ]; then
  timeout 300 python3 "$R/benchmarks/validate_timing.py" --repeats "${REPEATS:-5}" 2>&1 | tail -22
  [ -n "${IREE_CHECK:-1}" ] && timeout 120 python3 "$R/benchmarks/iree_crosscheck.py" 2>&1 | tail -7
  timeout 420 python3 "$R/benchmarks/independent_timers.py" 2>&1 | tail -30   # bakeoff vs JAX's and IREE's own timers
fi
CONFIG="$R/${H200_CONFIG:-configs/h200.yaml}"   # e.g. H200_CONFIG=configs/h200_tritongen_dtypes.yaml
if [ -n "${NO_WARM:-}" ]; then  # a shorter lease: cold compile only
  sed 's/warm: true/warm: false/' "$CONFIG" > /tmp/h200-cold.yaml; CONFIG=/tmp/h200-cold.yaml
fi
if [ -n "${RESUME:-}" ]; then
  mkdir -p results && cp "$R/$RESUME_DB" results/bakeoff.db
  timeout -s INT -k 20 "${RUN_TIMEOUT:-420}" python3 -m bakeoff run --resume "$RESUME" > "$OUT/run.log" 2>&1
else
  timeout -s INT -k 20 "${RUN_TIMEOUT:-420}" python3 -m bakeoff run "$CONFIG" "$@" > "$OUT/run.log" 2>&1
fi
python3 -m bakeoff show > "$OUT/show.txt" 2>&1
python3 -m bakeoff export latest > "$OUT/records.json"
cp results/bakeoff.db "$OUT/bakeoff.db"
tail -c 6000 "$OUT/show.txt"
