#!/usr/bin/env bash
# The lent GPU runner: pack what the GPU image lacks here, then run one named job per device call there.
#
#   bash benchmarks/gpu.sh pack            # here, in a checkout: .gpu/ and .gpudeps/ (git-ignored), about 63 MiB
#   git describe --always --dirty > REVISION   # here, before each call (git-ignored, so it travels only when
#                                          # carried): the records' harness revision (the device's copy may carry
#                                          # an older .git: without REVISION its records say that commit +dirty)
#   bash benchmarks/gpu.sh JOB [ARGS...]   # on the GPU machine, from the repo root, carrying .gpu, .gpudeps and
#                                          # REVISION
#
# Jobs (each installs .gpu and .gpudeps into $SITE (/tmp/site) first: tritongen and timing go on without IREE;
# runs in $WORK (/tmp/bakeoff-work), writes to $OUT):
#   suite [RUN ARGS]   configs/h200.yaml (SUITE_CONFIG) narrowed by WORKLOADS, BACKENDS, DTYPES (space-separated; five
#                      workloads on the five GPU backends in the config's dtypes by default; WORKLOADS=all: the full
#                      suite, about 14 minutes on the H200 in three dtypes), warm compile on, --jobs $JOBS,
#                      cut by Ctrl-C when the call's time runs short (the run stays resumable); then the phase
#                      table and overhead share, the gate's timeline, cases per minute, the cold/warm cache
#                      verification and gate policies (speed_summary.py); records.json, bakeoff.db and the logs
#                      packed into $OUT/suite.tar.gz.
#                      RESUME=RUN_ID finishes that run instead, from $RESUME_DB (default results/resume.db.gz,
#                      gzipped or not) carried in the tree; on the same warm machine carry .gpudeps, REVISION and
#                      the store without .gpu (IREE stays installed in $SITE; all of them exceed a call's 64 MiB).
#                      A suite whose BACKENDS leave out iree needs no .gpu at all.
#                      SUITE_S: seconds the run gets (default: what the call leaves after AGREE_S for the do_bench
#                      agreement).
#   config CONFIG [RUN ARGS]   measure the ceilings (bakeoff calibrate), then `bakeoff run CONFIG` (relative to
#                      the repo root); NO_WARM=1 turns warm compile off; show.txt, records.json, bakeoff.db.
#                      RUN ARGS that name backends (-b eager -b tritongen) without iree need no .gpu carried.
#   timing             the timer against triton.testing.do_bench (validate_timing.py --agreement-only), then
#                      REPEATS (5) fresh worker processes of each REPRO case (default
#                      "softmax/inductor ew_sigmoid_relu/inductor"): the spread of their medians; then
#                      flush_process_check.py (a memory-bound kernel's per-process time after each L2 flush;
#                      FLUSH_ARGS, e.g. "--processes 8 --hold-gib 0 8 24 48"); then address_check.py (eager's
#                      time with its input at other addresses; ADDRESS_ARGS, e.g. "--dtypes bfloat16 float16");
#                      TIMING_AGREE=0 leaves the do_bench agreement out.
#   quality            configs/sweep.yaml, configs/grad.yaml and configs/numerics.yaml (cpu sizes) on the GPU
#                      backends, each in its own store with its table; then XLA's and IREE's figures against
#                      their own tools' timers (independent_timers.py).
#   disturbance        gate_disturbance.py: does work in other processes move timing? (the evidence for
#                      `timing.gate: auto`); COMPILERS (JOBS - 1), ROUNDS (5).
#   tritongen [ARGS]   the clock checks (marker_clock_check.py, kernel_clock_check.py, pm_clock_check.py;
#                      TG_CLOCK=0 leaves them out), then configs/h200_tritongen_dtypes.yaml (TG_CONFIG) under
#                      `bakeoff run --jobs $JOBS` (TG_RUN_S, default 330 s; 0 leaves the run out), its paired table and
#                      noise shares (noise_share.py, with eager across cases), then tritongen_vs_inductor.py's
#                      do_bench table with its ceilings in the three dtypes in the time left (ARGS go to
#                      tritongen_vs_inductor.py: e.g. --workloads softmax --wide-dtypes float32 for the wide
#                      search's tune log on a GPU the pruned order was not tuned on); packed into
#                      $OUT/tritongen.tar.gz (the do_bench JSON lands in $OUT itself). The 99-case run takes
#                      about 400 s on 8 workers and the whole table about 140 s more: together they outrun one
#                      call, so give the run its own call (TG_RUN_S=500 TG_TABLE=0; the table is also left out
#                      when 60 s or less would be left for it), then the table a second call on the same warm
#                      machine (TG_RUN_S=0).
#   checks             the GPU tests (pytest -m gpu: the marker clock against NVML, ONNX Runtime's IOBinding without
#                      copies, the CUPTI pass, tritongen's bfloat16 loads against eager), then configs/sweep_h200.yaml on eager, ONNX Runtime, tritongen and
#                      IREE (CHECK_SWEEP_S, default 200 s) with its per-point table, then XLA's host figures layer
#                      by layer (independent_timers.py --xla-layers); run it with .ort carried (Settings) so that
#                      ONNX Runtime is the CUDA build; one checks.tar.gz.
#   inject             inject_disturbance.py: a small run of configs/h200.yaml (INJECT_ARGS narrow it) quiet, beside an
#                      outsider's GEMM loop on the GPU, and beside a CPU burner per core, each into its own store
#                      (all packed into $OUT/inject.tar.gz); the noise marks per phase and backend and the verdicts. CALL_S defaults to
#                      400 for this job (one device call of 420 s).
# Settings (environment): CALL_S seconds the whole call may take (default 570; a device call lasts at most 600),
# JOBS (8), OUT (/tmp/out), SITE (/tmp/site: where .gpu, .gpudeps and .ort install, first on PYTHONPATH).
# ONNX Runtime's CUDA build: ../shared/gpu/ort_parts.sh cuts it into .ort/part00..04 here; a warm machine keeps
# the ignored paths carried by earlier calls, so carry one part a call, back to back (a machine goes back 30 s
# after a call), and `.ort/wheel` with the last: from then on setup installs it into SITE, before the image's
# CPU build (a part missing: exit 2, naming the parts it found). Each step gets a time limit from what is left; bakeoff runs get SIGINT first, so a
# run keeps the records it finished.
set -uo pipefail
R=$(cd "$(dirname "$0")/.." && pwd)
JOB=${1:-help}; shift || true

pack() {  # IREE 3.13 repacked (from ../shared/gpu) and the pure-Python packages the image lacks, zipped
  cd "$R" || exit 2
  local exclude; exclude=$(git rev-parse --git-path info/exclude) && mkdir -p "$(dirname "$exclude")" || exit 2
  for d in /.gpu/ /.gpudeps/ /REVISION; do grep -qx "$d" "$exclude" 2>/dev/null || echo "$d" >> "$exclude"; done
  mkdir -p .gpu && cp -r "${GPU_SHARED:-../shared/gpu}"/* .gpu/ && chmod -R u+w .gpu
  local tmp; tmp=$(mktemp -d)
  # pydantic and SQLAlchemy (its C extensions dropped: the pure-Python fallback) for the harness; pytest for the
  # GPU tests (the image has Pygments); cupti-python for the PM sampler (pm_sampler.py, pm_clock_check.py; the
  # image has cuda-bindings, numpy and libcupti 13.0). CPython 3.12, as on the image.
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$tmp/whl" \
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 sqlalchemy==2.1.9 \
    pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pytest-timeout==2.4.0 \
    cupti-python==13.4.0 cuda-pathfinder==1.9.1 pyelftools==0.33 || exit 2
  mkdir "$tmp/site" && (cd "$tmp/site" && for w in "$tmp"/whl/*.whl; do python3 -m zipfile -e "$w" .; done \
    && find . -path '*sqlalchemy*' -name '*.so' -delete && rm -f ./*.dist-info/RECORD)
  mkdir -p .gpudeps && rm -f .gpudeps/pydeps.zip && (cd "$tmp/site" && python3 -m zipfile -c "$R/.gpudeps/pydeps.zip" .)
  rm -rf "$tmp"
  du -sh .gpu .gpudeps
  echo 'carry: [".gpu", ".gpudeps", "REVISION"]; then: bash benchmarks/gpu.sh JOB'
}

runs_iree() {  # JOB's ARGS...: whether the job may run an IREE case (tritongen and timing never; a suite unless
  # BACKENDS leaves iree out; config unless its RUN ARGS name backends (-b/--backend) and iree is not among them)
  case "$JOB" in
    tritongen|timing) return 1 ;;
    suite) [ -z "${BACKENDS:-}" ] || [[ " $BACKENDS " == *" iree "* ]] ;;
    config)
      local named=0 prev="" a
      for a in "$@"; do
        if [ "$prev" = -b ] || [ "$prev" = --backend ]; then named=1; [ "$a" = iree ] && return 0; fi
        case "$a" in --backend=*) named=1; [ "${a#--backend=}" = iree ] && return 0 ;; esac
        prev=$a
      done
      [ "$named" = 0 ] ;;
    *) return 0 ;;
  esac
}

setup() {  # JOB's ARGS...: on the GPU machine: install what travelled, put the harness on PYTHONPATH, print the
  # GPU's state
  T0=$(date +%s)
  export OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
  CALL_S=${CALL_S:-570}; JOBS=${JOBS:-8}
  local site=${SITE:-/tmp/site}
  [ -f "$R/.gpudeps/pydeps.zip" ] || { echo "carry .gpudeps (bash benchmarks/gpu.sh pack)" >&2; exit 2; }
  if [ -d "$R/.gpu" ]; then
    python3 "$R/.gpu/install_iree.py" "$site" >/dev/null || { echo "IREE did not install into $site" >&2; exit 2; }
  elif [ ! -d "$site/iree" ]; then  # a later call on a warm machine may leave .gpu (57 MiB) behind: room to carry
    if ! runs_iree "$@"; then
      echo "IREE is not in $site: the $JOB job runs no IREE case"
    else
      echo "carry .gpu (bash benchmarks/gpu.sh pack): IREE is not in $site yet" >&2; exit 2
    fi
  fi
  python3 -c "import zipfile, sys; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$R/.gpudeps/pydeps.zip" "$site"
  install_ort "$site" || exit 2
  export PYTHONPATH=$site:$R PYTHONUNBUFFERED=1
  [ -f "$R/REVISION" ] && export BAKEOFF_HARNESS_REV="$(cat "$R/REVISION")"  # a copy without .git
  mkdir -p "${WORK:-/tmp/bakeoff-work}" && cd "${WORK:-/tmp/bakeoff-work}" || exit 2
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv
  echo "cores: $(nproc)"
}

install_ort() {  # SITE: onnxruntime-gpu from the parts under .ort/ (ort_parts.sh), once they are all here
  local site=$1
  [ -f "$R/.ort/wheel" ] || return 0  # not carried: the image's onnxruntime (CPU build) stays
  [ -d "$site/onnxruntime" ] && return 0  # installed by an earlier call on this machine
  local whl; whl="/tmp/$(cat "$R/.ort/wheel")"
  cat "$R"/.ort/part0* > "$whl" && python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$whl" \
    || { echo "onnxruntime-gpu did not install from .ort/ ($(ls "$R/.ort" | tr '\n' ' ')): carry every part" >&2
         rm -f "$whl"; return 1; }
  rm -f "$whl"
  python3 -c "import sys; sys.path.insert(0, '$site'); import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" \
    || echo "onnxruntime-gpu installed into $site but does not import (its cases will say why)" >&2
}

left_s() { echo $(( CALL_S - ($(date +%s) - T0) )); }
B() { python3 -m bakeoff "$@"; }
run_limited() {  # LIMIT_S LOG ARGS...: bakeoff run under a time limit, SIGINT first (the run stays resumable)
  local limit=$1 log=$2; shift 2
  timeout -s INT -k 20 "$limit" python3 -m bakeoff run "$@" > "$log" 2>&1
  local rc=$?; echo "bakeoff run exited $rc"; grep -E "^run |Resume with|cases:|interrupted" "$log" | tail -4
}

subset_config() {  # SRC DST: configs/h200.yaml narrowed by WORKLOADS, BACKENDS, DTYPES, warm compile on
  python3 - "$1" "$2" <<'PY'
import os, sys, yaml
src, dst = sys.argv[1:3]
cfg = yaml.safe_load(open(src))
listed = cfg["backends"] if isinstance(cfg["backends"], dict) else {b: {} for b in cfg["backends"]}
workloads = (os.environ.get("WORKLOADS") or "ew_sigmoid_relu layernorm_gelu softmax gemm_bias_gelu mlp_block").split()
workloads = list(cfg["workloads"]) if workloads == ["all"] else workloads  # WORKLOADS=all: the config's every one
backends = (os.environ.get("BACKENDS") or "eager inductor tritongen xla iree").split()
dtypes = (os.environ.get("DTYPES") or " ".join(cfg["dtypes"])).split()
missing = [w for w in workloads if w not in cfg["workloads"]] + [b for b in backends if b not in listed]
if missing:
    sys.exit(f"{src}: not in the config: {', '.join(missing)}")
left_out = sorted(set(cfg["workloads"]) - set(workloads))
cfg.update(name=f"{cfg.get('name', 'h200')}_subset", workloads=workloads, backends={b: listed[b] for b in backends},
           dtypes=dtypes, compile={**(cfg.get("compile") or {}), "warm": True})
yaml.safe_dump(cfg, open(dst, "w"), sort_keys=False)
print(f"subset of {os.path.basename(src)}: workloads {workloads} (left out: {left_out}), backends {backends}, "
      f"dtypes {dtypes}, warm compile on: {len(workloads) * len(backends) * len(dtypes)} cases", flush=True)
PY
}

suite() {
  local args
  if [ -n "${RESUME:-}" ]; then
    mkdir -p results && local db="$R/${RESUME_DB:-results/resume.db.gz}"
    { gunzip -c "$db" 2>/dev/null || cat "$db"; } > results/bakeoff.db || exit 2
    args=(--resume "$RESUME")
  else
    subset_config "$R/${SUITE_CONFIG:-configs/h200.yaml}" "$OUT/suite.yaml" || exit 2
    args=("$OUT/suite.yaml")
  fi
  local limit=${SUITE_S:-$(( $(left_s) - ${AGREE_S:-120} - 40 ))}
  echo "the run gets ${limit} s, --jobs $JOBS"
  local t0; t0=$(date +%s)
  BAKEOFF_GATE_TRACE="$OUT/gate.trace" run_limited "$limit" "$OUT/run.log" "${args[@]}" --jobs "$JOBS" \
    --run-id-file "$OUT/run_id.txt" "$@"
  local run_s=$(( $(date +%s) - t0 ))
  local agree=()
  if [ "${AGREE_S:-120}" -gt 0 ] && [ "$(left_s)" -gt 60 ]; then
    timeout -k 10 $(( $(left_s) - 30 )) python3 "$R/benchmarks/validate_timing.py" --agreement-only \
      > "$OUT/do_bench_agreement.txt" 2>&1
    echo "do_bench agreement exited $?"
    agree=(--agreement "$OUT/do_bench_agreement.json" --agreement-log "$OUT/do_bench_agreement.txt")
  fi
  [ -s "$OUT/run_id.txt" ] || { echo "the run recorded nothing" >&2; exit 1; }
  local run_id; run_id=$(cat "$OUT/run_id.txt")
  python3 "$R/benchmarks/harness_overhead.py" --run-id "$run_id" --gate-trace "$OUT/gate.trace" > "$OUT/overhead.txt" 2>&1
  tail -c 5000 "$OUT/overhead.txt"
  B show "$run_id" > "$OUT/show.txt" 2>&1
  B export "$run_id" > "$OUT/records.json"
  cp results/bakeoff.db "$OUT/bakeoff.db"
  python3 "$R/benchmarks/speed_summary.py" "$OUT/records.json" --run-s "$(( run_s + ${FIRST_RUN_S:-0} ))" \
    --run-log "$OUT/run.log" "${agree[@]}" --json "$OUT/speed_summary.json" 2>&1 | grep -v "^gate:" | tail -40
  pack_out suite "$OUT" clear  # nine files and more: a call returns eight
}

pack_out() {  # NAME DIR clear|keep [HINT]: DIR packed into $OUT/NAME.tar.gz. clear: then it is all $OUT holds
  # (DIR may be $OUT itself); keep: what $OUT holds stays beside it. HINT ends the line saying how to unpack it.
  local name=$1 dir=$2 out=$3 hint=${4:-} tgz
  case "$out" in
    clear) tgz="/tmp/$name.tar.gz"
           tar czf "$tgz" -C "$dir" . && find "$OUT" -mindepth 1 -delete && mv "$tgz" "$OUT/" || return ;;
    keep) tar czf "$OUT/$name.tar.gz" -C "$dir" . || return ;;
    *) echo "pack_out $name: clear or keep \$OUT, not '$out'" >&2; return 2 ;;
  esac
  echo "$name.tar.gz: tar xzf it into DIR$hint"
}

config() {
  [ $# -ge 1 ] || { echo "usage: gpu.sh config CONFIG [RUN ARGS]" >&2; exit 2; }
  local cfg="$R/$1"; shift
  B calibrate --dtype bfloat16 --dtype float32 2>&1 | tail -4
  if [ -n "${NO_WARM:-}" ]; then sed 's/warm: true/warm: false/' "$cfg" > /tmp/config-cold.yaml; cfg=/tmp/config-cold.yaml; fi
  run_limited $(( $(left_s) - 20 )) "$OUT/run.log" "$cfg" --jobs "$JOBS" "$@"
  B show > "$OUT/show.txt" 2>&1; tail -c 6000 "$OUT/show.txt"
  B export latest > "$OUT/records.json"
  cp results/bakeoff.db "$OUT/bakeoff.db"
}

timing() {
  if [ "${TIMING_AGREE:-1}" != 0 ]; then
    timeout -k 10 $(( $(left_s) / 2 )) python3 "$R/benchmarks/validate_timing.py" --agreement-only \
      > "$OUT/agreement.txt" 2>&1
    echo "agreement exited $?"; grep -v -i warn "$OUT/agreement.txt" | tail -17
  fi
  local repro=()
  for r in ${REPRO:-softmax/inductor ew_sigmoid_relu/inductor}; do repro+=(--repro "$r"); done
  SKIP_AGREEMENT=1 timeout -k 10 $(( $(left_s) - 10 )) python3 "$R/benchmarks/validate_timing.py" --no-ceilings \
    --repeats "${REPEATS:-5}" "${repro[@]}" > "$OUT/fresh.txt" 2>&1
  echo "fresh workers exited $?"; grep -v -i warn "$OUT/fresh.txt" | tail -16
  # shellcheck disable=SC2086  # FLUSH_ARGS: words for flush_process_check.py
  timeout -k 5 $(( $(left_s) - 5 )) python3 "$R/benchmarks/flush_process_check.py" --json "$OUT/flush.json" \
    ${FLUSH_ARGS:-} > "$OUT/flush.txt" 2>&1; echo "flush_process_check exited $?"; tail -9 "$OUT/flush.txt"
  # shellcheck disable=SC2086  # ADDRESS_ARGS: words for address_check.py
  timeout -k 5 $(( $(left_s) - 5 )) python3 "$R/benchmarks/address_check.py" --json "$OUT/address.json" \
    ${ADDRESS_ARGS:-} > "$OUT/address.txt" 2>&1; echo "address_check exited $?"; tail -12 "$OUT/address.txt"
}

quality() {
  one() {  # NAME LIMIT_S ARGS...: one bakeoff run into its own store, then its table
    local name=$1 limit=$2; shift 2
    echo "== $name (limit ${limit} s, at $(( $(date +%s) - T0 )) s)"
    run_limited "$limit" "$OUT/$name.log" "$@" --db "sqlite:///$OUT/$name.db"
    B show --db "sqlite:///$OUT/$name.db" 2>&1 | tail -n 40
  }
  one sweep "${SWEEP_S:-80}" "$R/configs/sweep.yaml" -w attention -b eager -b inductor-dynamic -b inductor-static \
    -b xla-recompile -b xla-bucket --jobs 4
  one grad "${GRAD_S:-90}" "$R/configs/grad.yaml" -w attn_block -w mlp_block --jobs 4
  one numerics "${NUMERICS_S:-130}" "$R/configs/numerics.yaml" --preset cpu --jobs "$JOBS" \
    -b eager -b inductor -b tritongen -b xla -b iree
  echo "== independent timers ($(left_s) s left)"
  timeout $(( $(left_s) - 10 )) python3 "$R/benchmarks/independent_timers.py" \
    --workloads ew_sigmoid_relu,layernorm_gelu --iree-workloads ew_sigmoid_relu > "$OUT/timers.log" 2>&1
  tail -c 3500 "$OUT/timers.log"
}

disturbance() {
  timeout -k 10 $(( $(left_s) - 15 )) python3 "$R/benchmarks/gate_disturbance.py" \
    --compilers "${COMPILERS:-$(( JOBS - 1 ))}" --rounds "${ROUNDS:-5}" --json "$OUT/gate_disturbance.json" \
    > "$OUT/gate_disturbance.txt" 2>&1
  echo "gate_disturbance exited $?"; tail -c 11000 "$OUT/gate_disturbance.txt"
}

inject() {  # the stores, logs and JSON come back as one inject.tar.gz (a device call returns a few files only)
  timeout -k 10 $(( $(left_s) - 10 )) python3 "$R/benchmarks/inject_disturbance.py" --out "$PWD/inject-out" \
    --work "$PWD/inject" --total-s $(( $(left_s) - 45 )) --jobs "$JOBS" ${INJECT_ARGS:-} > "$OUT/inject.txt" 2>&1
  echo "inject_disturbance exited $?"
  [ -d "$PWD/inject-out" ] && pack_out inject "$PWD/inject-out" keep ", then --tables DIR"
  tail -c 11000 "$OUT/inject.txt"
}

tritongen() {  # the clock checks, the paired three-dtype run, do_bench beside it; one tarball
  local dir="$PWD/tg-out"; mkdir -p "$dir"
  if [ "${TG_CLOCK:-1}" != 0 ]; then
    timeout -k 5 60 python3 "$R/benchmarks/marker_clock_check.py" --json "$dir/marker_clock.json" \
      > "$dir/marker_clock.txt" 2>&1; echo "marker_clock_check exited $?"; tail -30 "$dir/marker_clock.txt"
    timeout -k 5 90 python3 "$R/benchmarks/kernel_clock_check.py" --json "$dir/kernel_clock.json" \
      > "$dir/kernel_clock.txt" 2>&1; echo "kernel_clock_check exited $?"; tail -12 "$dir/kernel_clock.txt"
    local nvperf; nvperf=$(dirname "$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null \
      | xargs -I{} find {} -name libnvperf_host.so 2>/dev/null | head -1)")  # beside torch's libcupti
    LD_LIBRARY_PATH="$nvperf:${LD_LIBRARY_PATH:-}" timeout -k 5 90 python3 "$R/benchmarks/pm_clock_check.py" \
      --json "$dir/pm_clock.json" > "$dir/pm_clock.txt" 2>&1; echo "pm_clock_check exited $?"
    tail -12 "$dir/pm_clock.txt"
  fi
  if [ "${TG_RUN_S:-330}" -gt 0 ]; then
    B calibrate --dtype bfloat16 --dtype float32 > "$dir/calibrate.txt" 2>&1
    run_limited "${TG_RUN_S:-330}" "$dir/run.log" "$R/${TG_CONFIG:-configs/h200_tritongen_dtypes.yaml}" --jobs "$JOBS"
    B show > "$dir/show.txt" 2>&1; B export latest > "$dir/records.json"; cp results/bakeoff.db "$dir/bakeoff.db"
    python3 "$R/benchmarks/tritongen_vs_inductor.py" --paired "sqlite:///$dir/bakeoff.db" --paired-only \
      > "$dir/paired.txt" 2>&1; tail -40 "$dir/paired.txt"
    { python3 "$R/benchmarks/noise_share.py" "sqlite:///$dir/bakeoff.db"
      python3 "$R/benchmarks/noise_share.py" "sqlite:///$dir/bakeoff.db" --across-cases; } > "$dir/noise.txt" 2>&1
    head -8 "$dir/noise.txt"; grep -E "groups:" "$dir/noise.txt"
  fi
  local budget=$(( $(left_s) - 50 ))
  if [ "${TG_TABLE:-1}" = 0 ] || [ "$budget" -le 60 ]; then  # a second call with TG_RUN_S=0 times it
    echo "do_bench table left out (TG_TABLE=${TG_TABLE:-1}, $(left_s) s of CALL_S left)"
  else
    timeout -k 5 $(( budget + 30 )) python3 "$R/benchmarks/tritongen_vs_inductor.py" \
      --dtypes bfloat16 float16 float32 --budget-s "$budget" "$@" > "$dir/dobench.txt" 2>&1
    echo "do_bench exited $? (budget ${budget} s)"; tail -45 "$dir/dobench.txt"
  fi
  pack_out tritongen "$dir" keep  # the do_bench JSON in $OUT stays beside it
}

checks() {  # the device checks: GPU tests, the sweep on the sweep-serving adapters, XLA's host figures
  local dir="$PWD/checks-out"; mkdir -p "$dir"
  python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" 2>&1 | tail -1
  timeout -k 5 240 python3 -m pytest -q -m gpu -p no:cacheprovider -rs "$R/tests/test_gpu_measurement.py" \
    "$R/tests/test_backend_onnxruntime.py" "$R/tests/test_tritongen_bf16.py" > "$dir/gpu_tests.txt" 2>&1
  echo "gpu tests exited $?"
  tail -25 "$dir/gpu_tests.txt"
  run_limited "${CHECK_SWEEP_S:-200}" "$dir/sweep.log" "$R/configs/sweep_h200.yaml" -b eager -b onnxruntime \
    -b tritongen -b iree --db "sqlite:///$dir/sweep.db" --jobs 4
  B export latest --db "sqlite:///$dir/sweep.db" 2>/dev/null | python3 "$R/benchmarks/sweep_points.py" \
    > "$dir/sweep_points.txt" 2>&1; tail -30 "$dir/sweep_points.txt"
  timeout -k 5 $(( $(left_s) - 25 )) python3 "$R/benchmarks/independent_timers.py" --xla-layers \
    --workloads ew_sigmoid_relu,layernorm_gelu > "$dir/xla_layers.txt" 2>&1; echo "xla layers exited $?"
  tail -30 "$dir/xla_layers.txt"
  pack_out checks "$dir" keep
}

case "$JOB" in
  pack) pack ;;
  inject) CALL_S=${CALL_S:-400}; setup "$@"; inject "$@"; echo "done after $(( $(date +%s) - T0 )) s" ;;
  suite|config|timing|quality|disturbance|tritongen|checks) setup "$@"; "$JOB" "$@"; echo "done after $(( $(date +%s) - T0 )) s" ;;
  *) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; [ "$JOB" = help ] || exit 2 ;;
esac
