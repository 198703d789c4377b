#!/usr/bin/env bash
# One device call (about 430 s) for the H200 figures of issues 14, 16 and 11 that this session's code adds:
#   sweep     configs/sweep.yaml, attention over S (gpu preset: 128..4096) on eager, Inductor dynamic and static,
#             XLA recompiling and bucketed (issue 14, shape sweeps)
#   grad      configs/grad.yaml, attn_block and mlp_block training steps on eager, Inductor, XLA, IREE (issue 14)
#   numerics  configs/numerics.yaml at the cpu preset's sizes on the GPU, every backend installed (issue 16)
#   calls     benchmarks/xla_call_paths.py and benchmarks/independent_timers.py: XLA's and IREE's single and
#             pipelined calls against JAX's and IREE's own timers (issue 11)
# Each step has a time limit (SIGINT: a run keeps the records it finished). Stores and logs go to $OUT.
# Usage, from the repo root on the GPU machine (carry .gpu and .gpudeps): bash benchmarks/h200_issue_checks.sh
set -uo pipefail
source "$PWD/benchmarks/gpu_preamble.sh"   # R, OUT, T0, PYTHONPATH; cd to a scratch folder
log="$OUT/runs.log"
run_config() {  # NAME LIMIT_S ARGS...: one bakeoff run into its own store, then its table
  local name=$1 limit=$2; shift 2
  echo "== $name (limit ${limit} s, at $(( $(date +%s) - T0 )) s)" | tee -a "$log"
  timeout -s INT -k 20 "$limit" python3 -m bakeoff run "$@" --db "sqlite:///$OUT/$name.db" >> "$log" 2>&1
  echo "rc=$?" | tee -a "$log"
  python3 -m bakeoff show --db "sqlite:///$OUT/$name.db" 2>&1 | tail -n "${SHOW_LINES:-40}"
}
run_config sweep "${SWEEP_S:-80}" "$R/configs/sweep.yaml" -w attention -b eager -b inductor-dynamic \
  -b inductor-static -b xla-recompile -b xla-bucket --jobs 4
run_config grad "${GRAD_S:-90}" "$R/configs/grad.yaml" -w attn_block -w mlp_block --jobs 4
run_config numerics "${NUMERICS_S:-130}" "$R/configs/numerics.yaml" --preset cpu --jobs 8 \
  -b eager -b inductor -b tritongen -b xla -b iree
echo "== calls (at $(( $(date +%s) - T0 )) s)"
timeout 35 python3 "$R/benchmarks/xla_call_paths.py" > "$OUT/calls.log" 2>&1
timeout 75 python3 "$R/benchmarks/independent_timers.py" --workloads ew_sigmoid_relu,layernorm_gelu \
  --iree-workloads ew_sigmoid_relu >> "$OUT/calls.log" 2>&1
tail -c 3500 "$OUT/calls.log"
echo "== done at $(( $(date +%s) - T0 )) s"
