#!/usr/bin/env bash
# Issue 10, the second device call after h200_speed.sh cut the full suite short (from the repo root on the
# GPU machine, carrying .gpu and .gpudeps, with results/resume.db.gz: the gzipped store the first call wrote):
#   1. finish run $RESUME (bakeoff run --resume), timed: the suite's time is the first call's run + this;
#   2. benchmarks/validate_timing.py: 5 fresh worker processes each of $REPRO (default Inductor's softmax
#      and ew_sigmoid_relu), the spread of their medians;
#   3. the cases that ran out of memory beside other workers (fp32 attention and attn_block), --jobs 8 again:
#      with the rerun-alone rule each is run again with the device to itself.
set -uo pipefail
T0=$(date +%s)
source "$PWD/benchmarks/gpu_preamble.sh"
CALL_S=${CALL_S:-560}
left_s() { echo $(( CALL_S - ($(date +%s) - T0) )); }
mkdir -p results && gunzip -c "$R/results/resume.db.gz" > results/bakeoff.db || exit 2
export BAKEOFF_GATE_TRACE="$OUT/gate_resume.trace"
RUN_T0=$(date +%s)
timeout -s INT -k 20 $(( $(left_s) - 60 )) python3 -m bakeoff run --resume "$RESUME" --jobs 8 > "$OUT/resume.log" 2>&1
echo "resume exited $? after $(( $(date +%s) - RUN_T0 )) s"; tail -3 "$OUT/resume.log"
unset BAKEOFF_GATE_TRACE
python3 -m bakeoff export "$RESUME" > "$OUT/records_full.json"
python3 "$R/benchmarks/harness_overhead.py" --run-id "$RESUME" > "$OUT/overhead_full.txt" 2>&1; tail -8 "$OUT/overhead_full.txt"
echo "== fresh workers ($(left_s) s left)"
REPRO_ARGS=()
for r in ${REPRO:-softmax/inductor ew_sigmoid_relu/inductor}; do REPRO_ARGS+=(--repro "$r"); done
SKIP_AGREEMENT=1 timeout -k 10 $(( $(left_s) - 150 )) python3 "$R/benchmarks/validate_timing.py" --no-ceilings \
  --repeats 5 "${REPRO_ARGS[@]}" > "$OUT/fresh.txt" 2>&1
echo "validate_timing exited $?"; grep -v -i warn "$OUT/fresh.txt" | tail -16
echo "== out of memory beside others? ($(left_s) s left)"
cat > /tmp/oom.yaml <<YAML
name: h200_fp32_attention
device: cuda
preset: gpu
dtypes: [float32]
workloads: [attention, attn_block]
backends: {eager: {}, inductor: {mode: default}, tritongen: {}, xla: {}, iree: {}}
seeds: [0, 1]
timing: {warmup_s: 0.05, budget_s: 0.4, min_reps: 10, target_iqr: 0.05, flush_l2: true, cuda_graph: true, profile: true}
compile: {warm: false}
timeout_s: 300
YAML
timeout -s INT -k 20 $(( $(left_s) - 15 )) python3 -m bakeoff run /tmp/oom.yaml --jobs 8 > "$OUT/oom.log" 2>&1
echo "oom run exited $?"
python3 -m bakeoff export latest > "$OUT/records_oom.json"
python3 - "$OUT/records_oom.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"{r['case_id'][:60]:60s} {r['status']:8s} {str(r.get('headline_ms'))[:8]:8s} alone: "
          f"{(r.get('rerun_alone_reason') or '-')[:90]}")
PY
cp results/bakeoff.db "$OUT/bakeoff.db"
echo "done after $(( $(date +%s) - T0 )) s"
