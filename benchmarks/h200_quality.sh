#!/usr/bin/env bash
# Issue 10 in ONE device call of at most CALL_S (default 400) seconds, from the repo root on the GPU machine
# (carry .gpu and .gpudeps, benchmarks/pack_gpu_deps.sh):
#   1. SUITE_S seconds (default 170) of configs/h200.yaml in bfloat16, float16 and float32 with warm compile,
#      --jobs $JOBS (8): cut short by Ctrl-C (resumable), then the phase table and benchmarks/speed_summary.py
#      (cases per minute, overhead share, cold/warm cache verification, worker starts) over the cases that ran;
#   2. benchmarks/validate_timing.py: do_bench agreement (eager, Inductor, tritongen on five workloads, three
#      interleaved rounds) and 5 fresh worker processes each of Inductor's ew_sigmoid_relu and softmax.
set -uo pipefail
T0=$(date +%s)
source "$PWD/benchmarks/gpu_preamble.sh"
CALL_S=${CALL_S:-400}
left_s() { echo $(( CALL_S - ($(date +%s) - T0) )); }
CONFIG=/tmp/h200-suite.yaml
WORKLOADS="ew_sigmoid_relu ew_gelu_silu_gate layernorm_gelu rmsnorm softmax softmax_large gemm_bias_gelu gemm_bias_residual attention attn_block mlp_block" \
BACKENDS="eager inductor tritongen xla iree onnxruntime tensorrt" DTYPES="bfloat16 float16 float32" \
  python3 "$R/benchmarks/h200_subset.py" "$R/configs/h200.yaml" "$CONFIG" || exit 2
RUN_T0=$(date +%s)
timeout -s INT -k 20 "${SUITE_S:-170}" python3 -m bakeoff run "$CONFIG" --jobs "${JOBS:-8}" > "$OUT/run.log" 2>&1
echo "bakeoff run exited $? after $(( $(date +%s) - RUN_T0 )) s"
RUN_S=$(( $(date +%s) - RUN_T0 ))
RUN_ID=$(python3 -c "from bakeoff.results.store import Store; print(Store().latest_run_id())")
python3 -m bakeoff export "$RUN_ID" > "$OUT/records.json"
cp results/bakeoff.db "$OUT/bakeoff.db"
python3 "$R/benchmarks/speed_summary.py" "$OUT/records.json" --run-s "$RUN_S" --run-log "$OUT/run.log" \
  --json "$OUT/speed_summary.json" 2>&1 | grep -v "^gate:" | tail -25
echo "== validate_timing ($(left_s) s left)"
timeout -k 10 $(( $(left_s) - 10 )) python3 "$R/benchmarks/validate_timing.py" --no-ceilings --repeats 5 \
  > "$OUT/validate_timing.txt" 2>&1
echo "validate_timing exited $?"
grep -v -i "warn" "$OUT/validate_timing.txt" | tail -30
echo "done after $(( $(date +%s) - T0 )) s"
