#!/usr/bin/env bash
# Issue 10, point 4 (do_bench agreement), on the lent H200 (from the repo root, carrying .gpu and .gpudeps):
#   1. benchmarks/dobench_gap.py: every timer variant against do_bench, with NVML clock and power;
#   2. benchmarks/validate_timing.py --agreement-only: the five workloads x eager/Inductor/tritongen;
#   3. the compute-bound workloads through the real CLI (--jobs 8), and their records' figures: what a user
#      gets, with the seconds the sustained load cost each case.
set -uo pipefail
source "$PWD/benchmarks/gpu_preamble.sh"
python3 -c "from bakeoff.harness.measure.calibrate import measure_ceilings as m; [print(r[:3]) for r in m('cuda', ['bfloat16'])]" 2>&1 | grep -v -i warn
timeout 300 python3 "$R/benchmarks/dobench_gap.py" --json "$OUT/gap.json" > "$OUT/gap.txt" 2>&1
echo "dobench_gap exited $?"; grep -v -i warn "$OUT/gap.txt" | tail -60
echo "== agreement ($(( $(date +%s) - T0 )) s)"
timeout 240 python3 "$R/benchmarks/validate_timing.py" --agreement-only > "$OUT/agree.txt" 2>&1
echo "validate_timing exited $?"; grep -v -i warn "$OUT/agree.txt" | tail -17
echo "== CLI ($(( $(date +%s) - T0 )) s)"
RUN_T0=$(date +%s)
timeout -s INT -k 20 "${CLI_S:-240}" python3 -m bakeoff run "$R/configs/h200.yaml" --workload gemm_bias_gelu \
  --workload attention --workload mlp_block --backend eager --backend inductor --backend tritongen --backend xla \
  --jobs 8 > "$OUT/cli.log" 2>&1
echo "run exited $? after $(( $(date +%s) - RUN_T0 )) s"; tail -2 "$OUT/cli.log"
python3 -m bakeoff export latest > "$OUT/records.json"
python3 - "$OUT/records.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
print(f"{'case':32s} {'status':8s} {'headline':>9s} {'timer':>8s} {'span':>8s} {'sust s':>6s} {'MHz':>5s} {'wall s':>6s}")
for r in sorted(rows, key=lambda r: (r["workload"], r["backend"])):
    f = lambda k, d=4: f"{r[k]:.{d}f}" if isinstance(r.get(k), (int, float)) else "-"
    print(f"{r['workload'] + ' ' + r['backend']:32s} {r['status']:8s} {f('headline_ms'):>9s} {f('latency_ms_median'):>8s} "
          f"{f('device_span_ms'):>8s} {f('sustained_s', 2):>6s} {f('sm_clock_mhz', 0):>5s} {f('wall_s', 1):>6s}")
PY
echo "total $(( $(date +%s) - T0 )) s"
