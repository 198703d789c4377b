"""bakeoff's latency figures against independent tools, on a GPU: prints a table of ratios.

For each workload (the `gpu` preset by default):
- XLA (bfloat16 by default): bakeoff's figures for the `xla` backend (harness.measure.figures, cache flush
  off, as the other tools do not flush) against JAX's own, measured in a separate process (CUPTI allows one
  subscriber; torch.profiler is another) on `jax.jit` of the same lowering:
    kernel sum   bakeoff `device_ms`       vs JAX's CUPTI profiler (jax.experimental.mosaic.gpu.profiler.measure)
    single call  bakeoff `host_latency_ms` vs a loop of f(x).block_until_ready(), per call
    pipelined    bakeoff `pipelined_ms`    vs N calls of f(x), one block_until_ready, per call
  and, for information, the headline (CUPTI span) beside JAX's kernel sum (span >= sum: the gaps).
  `--xla-layers`: in one process, each layer between JAX's own loop and bakeoff's host figures, on the same
  executable: the executable on prepare()'s arrays, the adapter's run/sync, a device synchronize timed (as the
  host figures were), to_torch per call, the pipelined batch at bakeoff's length and at the former 4 GiB cap.
- IREE (float32: .npy files have no bfloat16): bakeoff's figures for the `iree` backend against
  `iree-benchmark-module` (from the iree runtime package) on the same .vmfb and the same inputs:
    pipelined and single call vs its real time per iteration (back-to-back calls, host clock).
The target is a ratio within 5% (|ratio - 1| <= 0.05) for the like-for-like rows; the table says which
rows are like-for-like and marks each. JSON goes to $OUT/independent_timers.json when $OUT is set.

Usage (repo root, on the GPU machine):
  python benchmarks/independent_timers.py [--workloads ew_sigmoid_relu,layernorm_gelu,attention]
      [--iree-workloads ew_sigmoid_relu,layernorm_gelu,softmax,gemm_bias_gelu] [--preset gpu] [--dtype bfloat16]
Runs on the H200 image (Python 3.12, torch, jax with CUDA, iree); needs neither pydantic nor SQLAlchemy.
`--device cpu --preset smoke` is a dry run of the code paths (no CUPTI on the CPU: those rows stay empty).
  python benchmarks/independent_timers.py --xla-layers [--workloads ew_sigmoid_relu] [--rounds 20]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TOLERANCE = 0.05
TIMING = {"warmup_s": 0.2, "budget_s": 1.0, "min_reps": 20, "max_reps": 5000, "target_iqr": 0.02,
          "flush_l2": False, "cuda_graph": False, "profile": True, "profile_calls": 30, "sustained_s": 0.0}


def _graph(workload: str, preset: str, dtype: str):
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.suite import builtin_workloads

    w = builtin_workloads()[workload]
    return bind(w.graph, w.presets[preset], dtype)


def bakeoff_figures(backend_name: str, workload: str, preset: str, dtype: str, device: str) -> dict:
    """bakeoff's figures for one backend on one workload (no eager beside it, no flush)."""
    from bakeoff.backends import get_backend
    from bakeoff.harness.measure.figures import BACKEND_TARGET, measure_figures
    from bakeoff.harness.measure.timing import TimedCall
    from bakeoff.harness.worker.input_tensors import make_inputs
    from bakeoff.workloads import costs

    graph = _graph(workload, preset, dtype)
    backend = get_backend(backend_name)
    compiled = backend.compile(graph, [], device, backend.Options())
    inputs = make_inputs(graph, 0, device)
    prepared = compiled.prepare(inputs)
    target = TimedCall(BACKEND_TARGET, lambda: compiled.run(prepared), compiled.sync, backend.timed_with_events)
    out = measure_figures(target, None, device, TIMING, capturable=False, bytes_per_call=costs.min_bytes(graph))
    out["_compiled"], out["_inputs"] = compiled, inputs
    return out


# --- JAX's own figures, in a child process --------------------------------------------------------------

def jax_child(workload: str, preset: str, dtype: str, calls: int, platform: str = "cuda") -> dict:
    """In this (child) process: JAX's CUPTI kernel sum per call, and its timing loops, on jax.jit of the
    lowering the xla backend compiles (native attention, as its default)."""
    import jax
    import numpy as np

    from bakeoff.workloads.lower_jax import jax_dtype, lower_jax, share_gpu_with_torch

    share_gpu_with_torch()
    graph = _graph(workload, preset, dtype)
    rng = np.random.default_rng(0)
    args = [jax.device_put(rng.standard_normal(tuple(int(d) for d in n.shape), dtype=np.float32)
                           .astype(jax_dtype(n.dtype))) for n in graph.inputs]
    args = [jax.device_put(a, jax.devices("gpu" if platform == "cuda" else "cpu")[0]) for a in args]
    f = jax.jit(lower_jax(graph, "native", platform))
    jax.block_until_ready(f(*args))
    out: dict = {}
    try:
        from jax.experimental.mosaic.gpu import profiler

        _, timings = profiler.measure(f, iterations=calls)(*args)
        out["cupti_kernel_sum_ms"] = statistics.median(timings) if timings else None
        out["cupti_tool"] = "jax.experimental.mosaic.gpu.profiler.measure"
    except Exception as exc:  # Mosaic GPU's CUPTI binding is absent from some jaxlib builds: JAX's profiler
        out["cupti_error"] = f"mosaic profiler: {type(exc).__name__}: {exc}"[:300]
        if platform == "cuda":
            try:
                out["cupti_kernel_sum_ms"] = _trace_kernel_sum_ms(jax, f, args, calls)
                out["cupti_tool"] = "jax.profiler.trace (perfetto trace, GPU device tracks)"
            except Exception as exc2:
                out["cupti_error"] += f"; jax.profiler.trace: {type(exc2).__name__}: {exc2}"[:300]
    single = []  # as JAX's docs time a call: dispatch, then block until the result is ready
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        single.append((time.perf_counter() - t0) * 1e3)
    out["single_call_ms"] = statistics.median(single)
    batches = []
    n = max(5, min(200, int(20.0 / max(out["single_call_ms"], 1e-3))))
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            last = f(*args)
        jax.block_until_ready(last)
        batches.append((time.perf_counter() - t0) * 1e3 / n)
    out["pipelined_ms"], out["pipelined_calls"] = statistics.median(batches), n
    return out


def _trace_kernel_sum_ms(jax, f, args, calls: int) -> float:
    """Kernel time per call from JAX's own profiler: a perfetto trace of `calls` calls, summing the complete
    events on the GPU's device tracks that are not copies or memsets."""
    import glob
    import gzip

    with tempfile.TemporaryDirectory() as tmp:
        with jax.profiler.trace(tmp, create_perfetto_trace=True):
            for _ in range(calls):
                jax.block_until_ready(f(*args))
        [path] = glob.glob(os.path.join(tmp, "**", "perfetto_trace.json.gz"), recursive=True)
        with gzip.open(path, "rt") as fh:
            trace = json.load(fh)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    gpu_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                and "GPU" in str((e.get("args") or {}).get("name", ""))}
    total_us = sum(float(e.get("dur", 0)) for e in events if e.get("ph") == "X" and e.get("pid") in gpu_pids
                   and not any(w in str(e.get("name", "")).lower() for w in ("memcpy", "memset")))
    if not gpu_pids or total_us <= 0:
        raise RuntimeError("no GPU kernel events in JAX's trace")
    return total_us / calls / 1e3


def jax_figures(workload: str, preset: str, dtype: str, platform: str, calls: int = 30) -> dict:
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]); "
            "from independent_timers import jax_child; print('RESULT' + json.dumps(jax_child(sys.argv[3], "
            "sys.argv[4], sys.argv[5], int(sys.argv[6]), sys.argv[7])))")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT), str(Path(__file__).parent), workload, preset,
                           dtype, str(calls), platform], capture_output=True, text=True, timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[len("RESULT"):])
    return {"error": (proc.stderr or proc.stdout)[-600:]}


# --- IREE's own benchmark tool ------------------------------------------------------------------------

def benchmark_module_ms(vmfb: Path, inputs: list[Path], device: str, reps: int) -> list[float]:
    """Real time per call (ms) of each repetition iree-benchmark-module reports."""
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
    import numpy as np

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


def iree_benchmark(figures: dict, workload: str, preset: str, device: str) -> dict:
    graph = _graph(workload, preset, "float32")
    times = benchmark_compiled_ms(figures["_compiled"], graph, figures["_inputs"], device, reps=10)
    return {"iree_benchmark_module_ms": statistics.median(times), "repetitions": len(times)}


# --- XLA's host figures layer by layer, in one process (--xla-layers) -----------------------------------

def xla_layers(workload: str, preset: str, dtype: str, device: str, rounds: int, per: int = 100) -> list[tuple]:
    """Per-call host time (us, medians over `rounds` interleaved rounds of `per` single calls and one batch
    each) of each layer between JAX's own loop and bakeoff's host figures, on one XLA executable's inputs."""
    import jax
    import numpy as np
    import torch
    from bakeoff.backends import get_backend
    from bakeoff.harness.measure.timing import (host_latency, pipeline_calls, pipeline_memory_cap_bytes,
                                                pipelined_latency)
    from bakeoff.harness.worker.input_tensors import make_inputs
    from bakeoff.workloads import costs
    from bakeoff.workloads.lower_jax import lower_jax

    graph, backend = _graph(workload, preset, dtype), get_backend("xla")
    c = backend.compile(graph, [], device, backend.Options())
    prepared = c.prepare(make_inputs(graph, 0, device))
    cuda = device.startswith("cuda")
    f = jax.jit(lower_jax(graph, "native", "cuda" if cuda else "cpu"))
    own = [jax.device_put(np.asarray(x), x.device) for x in prepared]  # JAX's own arrays, as a JAX program has
    run, sync = (lambda: c.run(prepared)), c.sync

    def device_sync(r=None):
        sync()
        if cuda:
            torch.cuda.synchronize()
    layers = {"JAX loop: jax.jit f(own arrays), block_until_ready": (lambda: f(*own), jax.block_until_ready),
              "the executable (jax.stages.Compiled) on prepare()'s arrays": (lambda: c.executable(*prepared),
                                                                             jax.block_until_ready),
              "the adapter: run(prepared), sync()": (run, lambda r: sync()),
              "  + device synchronize timed (host figures before)": (run, device_sync),
              "  + to_torch per call (never timed)": (run, lambda r: (sync(), c.to_torch(r)))}
    for launch, wait in layers.values():
        for _ in range(20):
            wait(launch())
    single_ms = host_latency(run, sync, device, reps=50).median_ms
    n_jax = max(5, min(200, int(20.0 / max(single_ms, 1e-3))))
    n_now = pipeline_calls(single_ms, costs.min_bytes(graph), pipeline_memory_cap_bytes(device))
    n_before = pipeline_calls(single_ms, costs.min_bytes(graph))
    res: dict[str, tuple[list, list]] = {k: ([], []) for k in layers}
    res.update({f"bakeoff host_latency / pipelined_latency x{n}{why}": ([], [])
                for n, why in ((n_now, ""), (n_before, " (4 GiB cap)"))})

    def one(launch, wait, n):
        t0 = time.perf_counter()
        for _ in range(n):
            last = launch()
        wait(last)
        return (time.perf_counter() - t0) * 1e6 / n
    # The to_torch layer in rounds of its own, after the others: what it leaves behind (DLPack capsules, torch
    # tensors on XLA's buffers) then slows no other row.
    for group in ([k for k in layers if "to_torch" not in k] + [None], [k for k in layers if "to_torch" in k]):
        for _ in range(rounds):
            for k in group:
                if k is None:
                    for (name, (a, b)), n in zip(list(res.items())[-2:], (n_now, n_before)):
                        a.append(host_latency(run, sync, device, reps=per).median_ms * 1e3)
                        b.append(pipelined_latency(run, sync, device, n, reps=3).median_ms * 1e3)
                    continue
                launch, wait = layers[k]
                res[k][0].append(statistics.median(_single_us(launch, wait, per)))
                res[k][1].append(one(launch, wait, n_jax))
    return [(k, statistics.median(a), statistics.median(b), n_jax) for k, (a, b) in res.items()]


def _single_us(launch, wait, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        wait(launch())
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def print_xla_layers(args) -> None:
    for wl in [w for w in args.workloads.split(",") if w]:
        rows = xla_layers(wl, args.preset, args.dtype, args.device, args.rounds)
        base = rows[0]
        print(f"\n{wl} {args.preset} {args.dtype} on {args.device}: us per call, medians of {args.rounds} "
              f"interleaved rounds; pipelined loops x{base[3]} (JAX's) unless named")
        print(f"{'layer':62s} {'single':>9s} {'/JAX':>6s} {'pipelined':>10s} {'/JAX':>6s}")
        for name, single, piped, _ in rows:
            print(f"{name:62s} {single:9.2f} {single / base[1]:6.3f} {piped:10.2f} {piped / base[2]:6.3f}")


# --- the table ----------------------------------------------------------------------------------------

def _row(rows: list, workload: str, backend: str, figure: str, ours: float | None, theirs: float | None,
         tool: str, like_for_like: bool) -> None:
    ratio = ours / theirs if ours and theirs else None
    rows.append({"workload": workload, "backend": backend, "figure": figure, "bakeoff_ms": ours,
                 "independent_ms": theirs, "tool": tool, "ratio": ratio, "like_for_like": like_for_like,
                 "within_5pct": None if ratio is None or not like_for_like else abs(ratio - 1) <= TOLERANCE})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="ew_sigmoid_relu,layernorm_gelu,softmax,gemm_bias_gelu,attention")
    ap.add_argument("--iree-workloads", default="ew_sigmoid_relu,layernorm_gelu,softmax,gemm_bias_gelu")
    ap.add_argument("--preset", default="gpu")
    ap.add_argument("--dtype", default="bfloat16", help="XLA's dtype (IREE runs float32)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--xla-layers", action="store_true",
                    help="only XLA's host figures layer by layer against JAX's own loop, in this process")
    ap.add_argument("--rounds", type=int, default=20, help="interleaved rounds of --xla-layers")
    args = ap.parse_args()
    if args.xla_layers:
        return print_xla_layers(args)
    import torch

    rows: list[dict] = []
    notes: list[str] = []
    for wl in [w for w in args.workloads.split(",") if w]:
        ours = bakeoff_figures("xla", wl, args.preset, args.dtype, args.device)
        theirs = jax_figures(wl, args.preset, args.dtype, "cpu" if args.device == "cpu" else "cuda")
        if "error" in theirs or "cupti_error" in theirs:
            notes.append(f"{wl} jax: {theirs.get('error') or theirs.get('cupti_error')}")
        _row(rows, wl, "xla", "kernel sum", ours.get("device_ms"), theirs.get("cupti_kernel_sum_ms"),
             theirs.get("cupti_tool") or "JAX's CUPTI profiler", True)
        _row(rows, wl, "xla", "single call", ours.get("host_latency_ms"), theirs.get("single_call_ms"),
             "JAX loop: block_until_ready per call", True)
        _row(rows, wl, "xla", "pipelined", ours.get("pipelined_ms"), theirs.get("pipelined_ms"),
             f"JAX loop: {theirs.get('pipelined_calls')} calls, one block", True)
        _row(rows, wl, "xla", "headline (span)", ours.get("headline_ms"), theirs.get("cupti_kernel_sum_ms"),
             "JAX CUPTI profiler (sum: span >= sum)", False)
        notes.append(f"{wl} xla lowering: {ours['_compiled'].info.lowering or '-'}")
        del ours
    for wl in [w for w in args.iree_workloads.split(",") if w]:
        ours = bakeoff_figures("iree", wl, args.preset, "float32", args.device)
        try:
            theirs = iree_benchmark(ours, wl, args.preset, args.device)
        except Exception as exc:
            theirs = {}
            notes.append(f"{wl} iree-benchmark-module: {type(exc).__name__}: {exc}"[:400])
        for figure, key in (("pipelined", "pipelined_ms"), ("single call", "host_latency_ms")):
            _row(rows, wl, "iree", figure, ours.get(key), theirs.get("iree_benchmark_module_ms"),
                 "iree-benchmark-module", True)
        _row(rows, wl, "iree", "headline (span)", ours.get("headline_ms"), theirs.get("iree_benchmark_module_ms"),
             "iree-benchmark-module (host: includes dispatch)", False)
        del ours

    gpu = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu (a dry run: no CUPTI)"
    print(f"\n{gpu}  preset {args.preset}; xla {args.dtype}, iree float32; no cache flush")
    print(f"{'workload':18s} {'backend':7s} {'figure':16s} {'bakeoff ms':>11s} {'tool ms':>10s} {'ratio':>7s}  "
          f"{'<=5%?':6s} tool")
    for r in rows:
        fmt = lambda x: f"{x:.4f}" if isinstance(x, float) else "-"  # noqa: E731
        mark = {True: "yes", False: "NO", None: "-" if r["like_for_like"] else "(info)"}[r["within_5pct"]]
        print(f"{r['workload']:18s} {r['backend']:7s} {r['figure']:16s} {fmt(r['bakeoff_ms']):>11s} "
              f"{fmt(r['independent_ms']):>10s} {fmt(r['ratio']):>7s}  {mark:6s} {r['tool']}")
    for n in notes:
        print("note:", n)
    out = os.environ.get("OUT")
    if out:
        Path(out, "independent_timers.json").write_text(json.dumps(
            {"gpu": gpu, "preset": args.preset, "rows": rows, "notes": notes}, indent=1))


if __name__ == "__main__":
    main()
