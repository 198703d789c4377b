"""How close correct backends come to the verdict's limits: for every built-in workload, dtype and backend,
the RMSE ratio to eager (limit m = RMSE_MULTIPLIER) and the worst element's scaled error as a multiple of
eager's worst (limit WORST_FACTOR), both against the float64 reference, on every seed.

    PYTHONPATH=. python benchmarks/verdict_margins.py [--backends eager inductor] [--dtypes float32 bfloat16]
        [--preset smoke] [--device cpu] [--workloads a b]

Prints a table, the largest share of a limit first; `rule` says whether every seed was within the dtype's
tolerance (then the ratios are not needed to pass) or was judged against eager. A row whose status is not ok
is a correct backend the verdict rejects (or a backend that is wrong). Writes JSON to $OUT/verdict_margins.json when OUT is set.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="verdict-margins-"))

import torch  # noqa: E402

from bakeoff.backends import get_backend  # noqa: E402
from bakeoff.backends.base import TensorSpec  # noqa: E402
from bakeoff.harness.measure.checks import check_outputs, reference_outputs  # noqa: E402
from bakeoff.harness.measure.numerics import RMSE_MULTIPLIER, WORST_FACTOR  # noqa: E402
from bakeoff.harness.worker.input_tensors import make_inputs  # noqa: E402
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.lower_torch import TORCH_DTYPES  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402


def margins(workload: str, preset: str, dtype: str, backend: str, device: str, seeds: list[int]) -> dict:
    """The worst (largest) RMSE ratio and worst-element ratio over `seeds`, and the verdict."""
    w = builtin_workloads()[workload]
    graph = bind(w.graph, w.presets[preset], dtype)
    specs = TensorSpec.of_inputs(graph)
    baseline, b = get_backend("eager"), get_backend(backend)
    eager = baseline.compile(graph, specs, device, baseline.Options())
    compiled = b.compile(graph, specs, device, b.Options())
    row = {"workload": workload, "dtype": dtype, "backend": backend, "status": "ok", "rmse_ratio": 0.0,
           "worst_ratio": 0.0, "rule": "tolerance", "reason": None}
    for seed in seeds:
        inputs = make_inputs(graph, seed, device)
        refs = reference_outputs(graph, inputs, device)
        check = check_outputs(graph, seed, compiled(*inputs), eager(*inputs), refs)
        b, e = check.vs_ref, check.eager_vs_ref
        if b is not None and not b.within_tol:
            row["rule"] = "vs eager"  # passed (or failed) by the rules relative to eager, not the tolerance
        if check.verdict.status != "ok":
            row["status"], row["reason"] = check.verdict.status, check.verdict.reason
        if b is not None and e is not None:
            ratio = check.verdict.err_ratio_vs_eager
            row["rmse_ratio"] = max(row["rmse_ratio"], ratio if ratio is not None else float("inf"))
            worst = b.max_scaled / e.max_scaled if e.max_scaled > 0 else (0.0 if b.max_scaled == 0 else float("inf"))
            row["worst_ratio"] = max(row["worst_ratio"], worst)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", nargs="+", default=["eager", "inductor"])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float16", "bfloat16"])
    ap.add_argument("--workloads", nargs="+", default=list(builtin_workloads()))
    ap.add_argument("--preset", default="smoke")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    args = ap.parse_args()
    for name in args.backends:  # e.g. TRITON_INTERPRET=1 for tritongen on the CPU, before triton is imported
        os.environ.update(get_backend(name).worker_env(args.device))
    rows = []
    for wl in args.workloads:
        for dtype in args.dtypes:
            for backend in args.backends:
                try:
                    rows.append(margins(wl, args.preset, dtype, backend, args.device, args.seeds))
                except Exception as exc:  # a backend that cannot run a case is a row, not the end
                    rows.append({"workload": wl, "dtype": dtype, "backend": backend, "status": "error",
                                 "rmse_ratio": None, "worst_ratio": None, "reason": f"{type(exc).__name__}: {exc}"})
    def share(r: dict) -> float:  # the larger fraction of a limit used
        t = TORCH_DTYPES[r["dtype"]]
        if r["rmse_ratio"] is None:
            return float("inf")
        return max(r["rmse_ratio"] / RMSE_MULTIPLIER[t], r["worst_ratio"] / WORST_FACTOR[t])
    rows.sort(key=share, reverse=True)
    print(f"{'workload':<20} {'dtype':<9} {'backend':<12} {'status':<9} {'rule':<9} {'RMSE ratio':>10} {'limit':>5} "
          f"{'worst ratio':>11} {'limit':>5}")
    for r in rows:
        t = TORCH_DTYPES[r["dtype"]]
        fmt = (lambda x: "-" if x is None else f"{x:.3g}")
        print(f"{r['workload']:<20} {r['dtype']:<9} {r['backend']:<12} {r['status']:<9} {r.get('rule', '-'):<9} "
              f"{fmt(r['rmse_ratio']):>10} "
              f"{RMSE_MULTIPLIER[t]:>5g} {fmt(r['worst_ratio']):>11} {WORST_FACTOR[t]:>5g}"
              + (f"  {r['reason'][:100]}" if r["reason"] else ""))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "verdict_margins.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
