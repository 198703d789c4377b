#!/usr/bin/env bash
# Issue 10, the second device call of a full-suite measurement, after h200_speed.sh cut the suite short at the
# 600 s a call may last (from the repo root on the GPU machine, carrying .gpu, .gpudeps and
# results/resume.db.gz: the gzipped store the first call wrote):
#   1. finish run $RESUME (bakeoff run --resume --jobs $JOBS), timed: the suite's time is the first call's run
#      plus this; then the whole run's phase table and overhead share, and speed_summary.py (cache checks,
#      statuses, gate policies);
#   2. benchmarks/validate_timing.py --agreement-only: eager, Inductor and tritongen against do_bench;
#   3. validate_timing.py --repeats 5: fresh worker processes of $REPRO, the spread of their medians.
# Each step gets what is left of CALL_S (default 570) seconds, in that order; the resume leaves RESERVE_S
# (default 300) for 2. and 3. FIRST_RUN_S: the first call's run seconds, so the summary covers the whole run's time.
set -uo pipefail
T0=$(date +%s)
source "$PWD/benchmarks/gpu_preamble.sh"
CALL_S=${CALL_S:-570}
left_s() { echo $(( CALL_S - ($(date +%s) - T0) )); }
python3 -c "from bakeoff.harness.measure.calibrate import measure_ceilings as m; [print(r[:3]) for r in m('cuda', ['bfloat16'])]" 2>&1 | grep -v -i warn
mkdir -p results && gunzip -c "$R/results/resume.db.gz" > results/bakeoff.db || exit 2
export BAKEOFF_GATE_TRACE="$OUT/gate_resume.trace"
RUN_T0=$(date +%s)
timeout -s INT -k 20 $(( $(left_s) - ${RESERVE_S:-300} )) python3 -m bakeoff run --resume "$RESUME" --jobs "${JOBS:-8}" > "$OUT/resume.log" 2>&1
RUN_S=$(( $(date +%s) - RUN_T0 ))
echo "resume exited $? after $RUN_S s"; tail -3 "$OUT/resume.log"
unset BAKEOFF_GATE_TRACE
python3 -m bakeoff export "$RESUME" > "$OUT/records_full.json"
python3 "$R/benchmarks/harness_overhead.py" --run-id "$RESUME" > "$OUT/overhead_full.txt" 2>&1; tail -12 "$OUT/overhead_full.txt"
python3 "$R/benchmarks/speed_summary.py" "$OUT/records_full.json" --run-s "$(( RUN_S + ${FIRST_RUN_S:-0} ))" --run-log "$OUT/resume.log" \
  --json "$OUT/speed_summary_full.json" > "$OUT/speed_summary_full.txt" 2>&1; grep -v -i warn "$OUT/speed_summary_full.txt" | tail -40
python3 -m bakeoff show "$RESUME" > "$OUT/show.txt" 2>&1; tail -4 "$OUT/show.txt"
cp results/bakeoff.db "$OUT/bakeoff.db"
echo "== agreement ($(left_s) s left)"
timeout -k 10 $(( $(left_s) - 150 )) python3 "$R/benchmarks/validate_timing.py" --agreement-only > "$OUT/agree.txt" 2>&1
echo "validate_timing exited $?"; grep -v -i warn "$OUT/agree.txt" | tail -17
echo "== fresh workers ($(left_s) s left)"
REPRO_ARGS=()
for r in ${REPRO:-softmax/inductor ew_sigmoid_relu/inductor gemm_bias_gelu/inductor}; do REPRO_ARGS+=(--repro "$r"); done
SKIP_AGREEMENT=1 timeout -k 10 $(( $(left_s) - 10 )) python3 "$R/benchmarks/validate_timing.py" --no-ceilings \
  --repeats 5 "${REPRO_ARGS[@]}" > "$OUT/fresh.txt" 2>&1
echo "validate_timing exited $?"; grep -v -i warn "$OUT/fresh.txt" | tail -16
echo "done after $(( $(date +%s) - T0 )) s"
