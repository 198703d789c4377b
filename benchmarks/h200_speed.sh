#!/usr/bin/env bash
# Harness speed on the lent H200 (issue 10), in one device call of at most 10 minutes, or two with RESUME:
#   1. benchmarks/gate_disturbance.py: short kernels timed alone, while other processes compile, while they
#      compile and check on the GPU, and after a profiler session (the evidence for timing.gate and
#      timing.profiler_warmup);
#   2. configs/h200.yaml in bfloat16, float16 and float32 with warm compile, --jobs $JOBS, under a timeout;
#   3. benchmarks/harness_overhead.py: the phase table and the overhead share of that run.
# Records, the store and every table go to $OUT. Run from the repo root on the GPU machine, carrying .gpu and
# .gpudeps (benchmarks/pack_gpu_deps.sh):
#   bash benchmarks/h200_speed.sh [bakeoff run filters, e.g. -b inductor -b tritongen]
# Settings (environment): JOBS (default 4: workers on the one GPU, compiles spread over 16 cores),
# GATE (exclusive | timers_only; default: the config's, exclusive), CALL_S (the call's limit, default 590:
# the suite gets what is left of it after the disturbance benchmark, less 45 s for the tables),
# SKIP_DISTURBANCE=1, DISTURBANCE_ROUNDS (default 5).
# Resume in a second call: RESUME=<run id> RESUME_DB=<path under the repo root of the first call's
# bakeoff.db> bash benchmarks/h200_speed.sh   (add SKIP_DISTURBANCE=1 to keep the whole call for the suite).
set -uo pipefail
R=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
python3 .gpu/install_iree.py /tmp/site >/dev/null
python3 -c "import zipfile; zipfile.ZipFile('.gpudeps/pydeps.zip').extractall('/tmp/site')"
export PYTHONPATH=/tmp/site:$R PYTHONUNBUFFERED=1
[ -f "$R/REVISION" ] && export BAKEOFF_HARNESS_REV="$(cat "$R/REVISION")"  # a copy without .git
W=/tmp/bakeoff-work; mkdir -p "$W"; cd "$W"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv
echo "cores: $(nproc)"

if [ -z "${SKIP_DISTURBANCE:-}" ]; then
  timeout -k 10 200 python3 "$R/benchmarks/gate_disturbance.py" --compilers "$(( ${JOBS:-4} - 1 ))" \
    --rounds "${DISTURBANCE_ROUNDS:-5}" > "$OUT/gate_disturbance.txt" 2>&1
  echo "gate_disturbance exited $? after $(( $(date +%s) - T0 )) s"
  tail -c 9000 "$OUT/gate_disturbance.txt"
fi

GATE_ARGS=(); [ -n "${GATE:-}" ] && GATE_ARGS=(--gate "$GATE")
RUN_TIMEOUT=$(( ${CALL_S:-590} - ($(date +%s) - T0) - 45 ))
echo "the suite gets ${RUN_TIMEOUT} s (then Ctrl-C: the run stays resumable)"
if [ -n "${RESUME:-}" ]; then
  mkdir -p results && cp "$R/$RESUME_DB" results/bakeoff.db
  timeout -s INT -k 20 "$RUN_TIMEOUT" python3 -m bakeoff run --resume "$RESUME" --jobs "${JOBS:-4}" \
    > "$OUT/run.log" 2>&1
else
  CONFIG=/tmp/h200-3dtypes.yaml
  sed -e 's/^dtypes: .*/dtypes: [bfloat16, float16, float32]/' -e 's/warm: false/warm: true/' \
    "$R/configs/h200.yaml" > "$CONFIG"
  grep -q '^dtypes: \[bfloat16, float16, float32\]' "$CONFIG" || { echo "could not set dtypes in $CONFIG"; exit 2; }
  timeout -s INT -k 20 "$RUN_TIMEOUT" python3 -m bakeoff run "$CONFIG" --jobs "${JOBS:-4}" \
    "${GATE_ARGS[@]}" "$@" > "$OUT/run.log" 2>&1
fi
echo "bakeoff run exited $? after $(( $(date +%s) - T0 )) s in all"
grep -E "^run |Resume with|cases:|interrupted" "$OUT/run.log" | tail -4
RUN_ID=$(python3 -c "from bakeoff.results.store import Store; print(Store().latest_run_id())")
python3 "$R/benchmarks/harness_overhead.py" --run-id "$RUN_ID" > "$OUT/overhead.txt" 2>&1
cat "$OUT/overhead.txt"
python3 -m bakeoff show "$RUN_ID" > "$OUT/show.txt" 2>&1
python3 -m bakeoff export "$RUN_ID" > "$OUT/records.json"
cp results/bakeoff.db "$OUT/bakeoff.db"
python3 - "$OUT/records.json" <<'EOF'
# Quality held: cold compiles show no cache hit and warm ones a verified hit; statuses; worker starts.
import collections, json, sys
records = json.load(open(sys.argv[1]))
status = collections.Counter(r["status"] for r in records)
cold_hits = [r["case_id"] for r in records if r.get("cache_hit_cold")]
cold_nonempty = [r["case_id"] for r in records if (r.get("cache_files_before_cold") or 0) > 0]
warm = collections.Counter(str(r.get("cache_hit_warm")) for r in records if r.get("compile_warm_s") is not None)
starts = collections.Counter(f"{r.get('worker_start')}/{r.get('worker_start_warm', '-')}" for r in records
                             if r["status"] != "skipped")
print(f"statuses: {dict(status)}")
print(f"cold compiles with a cache hit: {cold_hits or 'none'}; cold caches not empty: {cold_nonempty or 'none'}")
print(f"warm cache hit: {dict(warm)}; worker starts (cold/warm): {dict(starts)}")
print(f"timing gate policy: {sorted({r.get('gate_policy') for r in records if r.get('gate_policy')})}")
EOF
echo "done after $(( $(date +%s) - T0 )) s"
