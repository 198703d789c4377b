"""Cross-check bakeoff's timing of an IREE module against IREE's own `iree-benchmark-module` (issue 4).

Compiles one workload with the `iree` backend, times it with bakeoff's timer (host clock + sync, as every
run records for IREE) twice: with the cache flush before every sample, as recorded runs do by default
(`timing.flush_l2: true`), and without it, which is what `iree-benchmark-module` does (back-to-back calls, warm
caches). Then saves the same .vmfb and the same random inputs (.npy) and times them with
`iree-benchmark-module` from the runtime package. Prints all three medians and both ratios. float32 by
default: .npy files have no bfloat16.

Usage: python benchmarks/iree_crosscheck.py [--workload layernorm_gelu] [--preset gpu] [--device cuda]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from bakeoff.backends import get_backend  # noqa: E402
from bakeoff.harness.worker.input_tensors import make_inputs  # noqa: E402
from bakeoff.harness.measure.timing import TimedCall, measure  # noqa: E402
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402


def benchmark_module_ms(vmfb: Path, inputs: list[Path], device: str, reps: int) -> list[float]:
    """Real-time per call (ms) of each repetition reported by iree-benchmark-module."""
    import iree._runtime_libs as libs

    exe = Path(libs.__file__).parent / "iree-benchmark-module"
    args = [str(exe), f"--module={vmfb}", "--function=main", f"--device={device}",
            f"--benchmark_repetitions={reps}", "--benchmark_format=json"]
    args += [f"--input=@{p}" for p in inputs]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    runs = json.loads(out[out.index("{"):])["benchmarks"]
    unit = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
    return [b["real_time"] * unit[b["time_unit"]] for b in runs if b.get("run_type") == "iteration"]


def benchmark_compiled_ms(compiled, graph, inputs, device: str, reps: int = 10) -> list[float]:
    """iree-benchmark-module's real time per call (ms, one value per repetition) on the module bakeoff's iree
    backend compiled (its StableHLO and flags, compiled again to a .vmfb) and the same inputs (.npy files)."""
    import iree.compiler as ireec

    arts = compiled.artifacts()
    with tempfile.TemporaryDirectory() as tmp:
        vmfb = Path(tmp, "module.vmfb")
        vmfb.write_bytes(ireec.compile_str(arts["stablehlo"], input_type="stablehlo", extra_args=arts["flags"]))
        paths = []
        for n, x in zip(graph.inputs, inputs):
            p = Path(tmp, f"{n.attr('name')}.npy")
            np.save(p, x.cpu().numpy())
            paths.append(p)
        return benchmark_module_ms(vmfb, paths, "local-task" if device == "cpu" else "cuda", reps=reps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="layernorm_gelu")
    ap.add_argument("--preset", default="gpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    w = builtin_workloads()[args.workload]
    graph = bind(w.graph, w.presets[args.preset], args.dtype)
    inputs = make_inputs(graph, 0, args.device)
    compiled = get_backend("iree").compile(graph, [], args.device, {})
    prepared = compiled.prepare(inputs)
    ours = {}   # flush_l2 -> Stats: each with its own TimedCall (samples accumulate in a TimedCall)
    for flush in (True, False):
        target = TimedCall("iree", lambda: compiled.run(prepared), compiled.sync, False)
        ours[flush] = measure([target], args.device, warmup_s=0.2, budget_s=2.0, min_reps=20, max_reps=2000,
                              target_iqr=0.02, flush_l2=flush)["iree"]
    arts = compiled.artifacts()
    theirs = benchmark_compiled_ms(compiled, graph, inputs, args.device, reps=10)
    med = float(np.median(theirs))
    print(f"{args.workload} {args.preset} {args.dtype} on {args.device} (target {arts['target']}, "
          f"{arts['dispatch_count']} dispatches)")
    for flush, label in ((True, "cache flushed before each sample, as recorded runs"),
                         (False, "no flush, like iree-benchmark-module")):
        s = ours[flush]
        print(f"  bakeoff timer (host clock + sync, {label}): median {s.median_ms:.4f} ms, n={s.n}, "
              f"IQR/median {s.iqr_rel:.3f}")
    print(f"  iree-benchmark-module: median of {len(theirs)} repetitions {med:.4f} ms")
    for flush in (True, False):
        print(f"  ratio bakeoff (flush {'on' if flush else 'off'}) / iree-benchmark-module: "
              f"{ours[flush].median_ms / med:.3f}")
    out = os.environ.get("OUT")
    if out:
        Path(out, "iree_crosscheck.json").write_text(json.dumps(
            {"ours_ms_flush": ours[True].median_ms, "ours_n_flush": ours[True].n,
             "ours_ms_no_flush": ours[False].median_ms, "ours_n_no_flush": ours[False].n,
             "iree_benchmark_module_ms": theirs, "target": arts["target"], "dispatches": arts["dispatch_count"]},
            indent=1))


if __name__ == "__main__":
    main()
