#!/usr/bin/env bash
# Harness speed on the lent H200 (issue 10) in ONE device call of at most CALL_S (default 420) seconds:
#   1. a SUBSET of configs/h200.yaml (benchmarks/h200_subset.py: five workloads on the five GPU backends,
#      bfloat16, warm compile on; it prints which), --jobs $JOBS, under a timeout that leaves room for 2 and 3
#      (cut short, the run stays resumable and the tables cover the cases that finished);
#   2. benchmarks/validate_timing.py --agreement-only: eager, Inductor and tritongen against
#      triton.testing.do_bench on five workloads (the timer and the CUPTI-span headline; target 5%);
#   3. benchmarks/speed_summary.py: the phase table per backend, the overhead share, cases per minute,
#      cold/warm cache verification (empty cold caches, Inductor's own cache_hit_cold False, a verified warm
#      hit), statuses, the gate policy of each case and why, and the do_bench table; JSON in
#      $OUT/speed_summary.json.
# From the repo root on the GPU machine, carrying .gpu and .gpudeps (benchmarks/pack_gpu_deps.sh):
#   bash benchmarks/h200_speed.sh [more bakeoff run arguments, e.g. --gate exclusive]
#   MODE=disturbance bash benchmarks/h200_speed.sh     # benchmarks/gate_disturbance.py alone, in one call
#   MODE=checks bash benchmarks/h200_speed.sh          # benchmarks/check_cost.py on the GPU: one check's cost
#                                                      # before and now, 8192^2 and attention's 8x32x4096x128
# Settings (environment): JOBS (default 4), CALL_S (420), AGREE_S (seconds kept for 2., default 120),
# WORKLOADS, BACKENDS, DTYPES (space-separated, overriding the subset), GATE (auto | exclusive | timers_only),
# RESUME (a run id: finish that run from results/bakeoff.db carried in the repo copy; the trace is appended).
set -uo pipefail
T0=$(date +%s)
source "$PWD/benchmarks/gpu_preamble.sh"   # R, OUT, PYTHONPATH; cd to a scratch folder
CALL_S=${CALL_S:-420}
left_s() { echo $(( CALL_S - ($(date +%s) - T0) )); }

if [ "${MODE:-suite}" = disturbance ]; then
  timeout -k 10 $(( $(left_s) - 15 )) python3 "$R/benchmarks/gate_disturbance.py" \
    --compilers "$(( ${JOBS:-4} - 1 ))" --rounds "${DISTURBANCE_ROUNDS:-5}" --json "$OUT/gate_disturbance.json" \
    > "$OUT/gate_disturbance.txt" 2>&1
  echo "gate_disturbance exited $? after $(( $(date +%s) - T0 )) s"
  tail -c 11000 "$OUT/gate_disturbance.txt"
  exit 0
fi

if [ "${MODE:-suite}" = checks ]; then
  timeout -k 10 $(( $(left_s) - 15 )) python3 "$R/benchmarks/check_cost.py" --device cuda --repeats 2 \
    --shape 8192x8192 --shape 8x32x4096x128 --dtype bfloat16 --dtype float32 2>&1 | tee "$OUT/check_cost.txt"
  exit 0
fi

CONFIG=/tmp/h200-speed.yaml
GATE_ARGS=()
[ -n "${GATE:-}" ] && GATE_ARGS=(--gate "$GATE")
if [ -n "${RESUME:-}" ]; then   # RESUME=RUN_ID: finish an interrupted run, from the store carried in results/
  mkdir -p results && cp "$R/results/bakeoff.db" results/bakeoff.db && chmod u+w results/bakeoff.db || exit 2
  RUN_ARGS=(--resume "$RESUME")
else
  python3 "$R/benchmarks/h200_subset.py" "$R/configs/h200.yaml" "$CONFIG" || exit 2
  RUN_ARGS=("$CONFIG" "${GATE_ARGS[@]}")
fi
RUN_TIMEOUT=$(( $(left_s) - ${AGREE_S:-120} - 30 ))
echo "the suite gets ${RUN_TIMEOUT} s (then Ctrl-C: the run stays resumable), --jobs ${JOBS:-4}"
RUN_T0=$(date +%s)
export BAKEOFF_GATE_TRACE="$OUT/gate.trace"   # what the gate did, moment by moment (benchmarks/gate_timeline.py)
timeout -s INT -k 20 "$RUN_TIMEOUT" python3 -m bakeoff run "${RUN_ARGS[@]}" --jobs "${JOBS:-4}" "$@" \
  > "$OUT/run.log" 2>&1
RUN_RC=$?
RUN_S=$(( $(date +%s) - RUN_T0 ))
echo "bakeoff run exited $RUN_RC after $RUN_S s"
grep -E "^run |Resume with|cases:|interrupted" "$OUT/run.log" | tail -4

AGREE_TIMEOUT=$(( $(left_s) - 30 ))
if [ "$AGREE_TIMEOUT" -gt 20 ] && [ "${AGREE_S:-120}" -gt 0 ]; then
  timeout -k 10 "$AGREE_TIMEOUT" python3 "$R/benchmarks/validate_timing.py" --agreement-only \
    > "$OUT/do_bench_agreement.txt" 2>&1
  echo "do_bench agreement exited $? ($(( $(date +%s) - T0 )) s so far)"
else
  echo "no time left for the do_bench agreement"
fi

RUN_ID=$(python3 -c "from bakeoff.results.store import Store; print(Store().latest_run_id())")
python3 "$R/benchmarks/harness_overhead.py" --run-id "$RUN_ID" > "$OUT/overhead.txt" 2>&1
cat "$OUT/overhead.txt"
python3 "$R/benchmarks/gate_timeline.py" "$OUT/gate.trace" > "$OUT/gate_timeline.txt" 2>&1
head -c 4000 "$OUT/gate_timeline.txt"
python3 -m bakeoff show "$RUN_ID" > "$OUT/show.txt" 2>&1
python3 -m bakeoff export "$RUN_ID" > "$OUT/records.json"
cp results/bakeoff.db "$OUT/bakeoff.db"
python3 "$R/benchmarks/speed_summary.py" "$OUT/records.json" --run-s "$RUN_S" --run-log "$OUT/run.log" \
  --agreement "$OUT/do_bench_agreement.json" --agreement-log "$OUT/do_bench_agreement.txt" \
  --json "$OUT/speed_summary.json"
echo "done after $(( $(date +%s) - T0 )) s"
