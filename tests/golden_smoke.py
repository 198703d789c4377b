"""The behaviour guard: what the test suite's two smoke runs must keep, kept in tests/data/golden_smoke.json.

The runs are the ones the suite already makes through the real CLI: `smoke` (configs/smoke.yaml on eager and
Inductor, conftest.smoke_run) and `backends` (the same config on XLA, IREE, ONNX Runtime and TensorRT, two
workloads, test_cli_backends.background_run_args). Per case (its case id: workload/shape/dtype/backend) the
golden file holds its status, its verdict fields (VERDICT) and the names of the fields it measured (non-null);
per run, the export's columns. tests/test_cli_smoke.py and tests/test_cli_backends.py compare their runs to
it: the same cases, statuses and verdicts, the same columns, the same figures measured. Values are not
compared (they are timings and errors).

A field measured in only some runs is kept as `sometimes` (the generator runs the CLI several times), and
VOLATILE names the fields whose presence depends on timing or scheduling whatever the code does.

Regenerate it after a deliberate change of behaviour, and review the diff:

    PYTHONPATH=. python tests/golden_smoke.py [--runs 2] [--out tests/data/golden_smoke.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "data" / "golden_smoke.json"

# What decides a case's outcome, beside its status: none of these may change without a deliberate change.
VERDICT = ("status", "err_within_tol_vs_fp64", "err_within_tol_vs_eager", "eager_err_within_tol_vs_fp64",
           "eager_deterministic", "post_timing_check", "warm_check", "cache_hit_cold", "cache_hit_warm",
           "worst_output", "headline_method", "timing_method", "eager_timing_method", "headline_fallback")
# Present or not by the run's timing, load or scheduling, not by the code: never compared.
VOLATILE = frozenset({
    "latency_drift_rel", "eager_drift_rel",  # judged only from 15 samples; the sampling stops at the IQR target
    "host_other_cpu_share",  # None for a timing window under MIN_TICKS clock ticks (measure/load_watch.py)
    "break_even_calls",  # only where the backend's headline beat eager's
    "noise_reasons", "measurement_quality",  # the machine's load during the timing window
    "headline_quality", "headline_noise_reasons", "host_quality", "host_noise_reasons",  # the same, per figure
    "speedup_quality", "speedup_noise_reasons", "speedup_drift_rel",  # the same for the speedup (drift: 15 pairs)
    "worker_start_reason", "worker_start_warm_reason",  # which slot's worker was pre-started when
    "stderr_tail", "stderr_tail_warm", "traceback", "warm_error", "rerun_alone_reason",
    "gpu_other_processes", "gpu_process_error", "sm_clock_error", "profile_error",
})


def measured(record: dict[str, Any]) -> set[str]:
    """The fields of an exported record that hold a value, less the volatile ones."""
    return {k for k, v in record.items() if v is not None and k not in VOLATILE}


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's export as the golden file keeps it: per case id, its status, verdict and measured fields;
    the export's columns (the JSON export lists every column for every record)."""
    columns = list(records[0]) if records else []
    cases = {r["case_id"]: {"verdict": {k: r.get(k) for k in VERDICT}, "measured": sorted(measured(r))}
             for r in records}
    return {"columns": columns, "cases": dict(sorted(cases.items()))}


def merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' summaries of the same command as one golden entry: fields measured in every run are
    `measured`, those measured in some `sometimes`. Verdicts and columns must agree between the runs."""
    first = runs[0]
    for other in runs[1:]:
        problems = compare({"columns": first["columns"], "cases": {k: {**c, "sometimes": []}
                                                                   for k, c in first["cases"].items()}},
                           other, fields=False)
        if problems:
            raise SystemExit("the runs disagree beyond their figures:\n" + "\n".join(problems))
    cases = {}
    for key, case in first["cases"].items():
        sets = [set(run["cases"][key]["measured"]) for run in runs]
        always, some = set.intersection(*sets), set.union(*sets)
        cases[key] = {"verdict": case["verdict"], "measured": sorted(always), "sometimes": sorted(some - always)}
    return {"columns": first["columns"], "cases": cases}


def compare(golden: dict[str, Any], summary: dict[str, Any], fields: bool = True) -> list[str]:
    """What differs between a golden entry and a run's summary, one line each (empty: the same behaviour)."""
    problems = []
    want, got = set(golden["columns"]), set(summary["columns"])
    if want != got:
        problems.append(f"export columns: missing {sorted(want - got)}, new {sorted(got - want)}")
    for key in sorted(set(golden["cases"]) | set(summary["cases"])):
        g, s = golden["cases"].get(key), summary["cases"].get(key)
        if g is None or s is None:
            problems.append(f"{key}: {'not in the golden file' if g is None else 'no longer run'}")
            continue
        for name, value in g["verdict"].items():
            if s["verdict"].get(name) != value:
                problems.append(f"{key}: {name} {s['verdict'].get(name)!r}, was {value!r}")
        if fields:
            now, always = set(s["measured"]), set(g["measured"])
            if always - now:
                problems.append(f"{key}: no longer measured: {sorted(always - now)}")
            if now - always - set(g["sometimes"]):
                problems.append(f"{key}: newly measured: {sorted(now - always - set(g['sometimes']))}")
    return problems


def _bakeoff(args: list[str], cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "bakeoff", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "220"})
    if proc.returncode != 0:
        raise SystemExit(f"bakeoff {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def commands(work: Path) -> dict[str, list[str]]:
    """The `bakeoff run` arguments of each run, as the suite gives them (the store is `<name>.db` in `work`)."""
    sys.path.insert(0, str(TESTS))
    from conftest import SMOKE_GATE, SMOKE_JOBS
    from test_cli_backends import background_run_args

    backends = background_run_args(work)  # copies configs/ into work
    db_at = backends.index("--db")
    backends[db_at + 1] = f"sqlite:///{work / 'backends.db'}"
    smoke = ["run", "configs/smoke.yaml", "--backend", "eager", "--backend", "inductor", "--jobs", str(SMOKE_JOBS),
             "--gate", SMOKE_GATE, "--db", f"sqlite:///{work / 'smoke.db'}"]
    return {"smoke": smoke, "backends": backends}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="runs of each command (fields measured in only some "
                                                         "are kept as `sometimes`)")
    ap.add_argument("--out", type=Path, default=GOLDEN)
    args = ap.parse_args()
    os.environ.setdefault("BAKEOFF_PROBE_CACHE", tempfile.mkdtemp(prefix="golden-probe-"))
    golden: dict[str, Any] = {}
    runs: dict[str, list[dict[str, Any]]] = {}
    for i in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="golden-smoke-"))
        try:
            for name, run_args in commands(work).items():
                print(f"run {i + 1}/{args.runs}: bakeoff {' '.join(run_args)}", flush=True)
                _bakeoff(run_args, work)
                db = run_args[run_args.index("--db") + 1]
                runs.setdefault(name, []).append(summarize(json.loads(_bakeoff(["export", "latest", "--db", db], work))))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    for name, summaries in runs.items():
        golden[name] = merge(summaries)
    args.out.write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {args.out}: " + ", ".join(f"{n} {len(g['cases'])} cases" for n, g in golden.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
