"""Where a cold compile's host time goes, measured without a GPU: the config search's compiles for sm_90.

Runs what `pipeline.compile_graph` runs before and after the search's timing, through the same code: fusion,
codegen, shared kernels, writing and importing the sources, then `tune.compile_groups` (every candidate of every
kernel in one batch of threads, each kernel's launcher stub built with it) and the winners' compile (here the
first candidate of each search stands for the winner: the orders put the H200's winners first). Triton's JIT is
aimed at sm_90 by a stand-in driver; launcher stubs link against an empty stand-in libcuda (built here with the C
compiler), so they build as on a GPU host and only fail to load, which the search ignores (the first launch
builds them on a GPU). Not measured: the search's timing on the device (its do_bench calls).

    python -m bakeoff.backends.tritongen.compile_profile attn_block --dtype bfloat16 [--threads 4] [--json]

Put the GPU's Triton first on sys.path (PYTHONPATH=/path/to/triton-3.6:$PWD); a fresh TRITON_CACHE_DIR and
BAKEOFF_TRITONGEN_CACHE_DIR are made per run, so every compile is cold.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bakeoff.backends.tritongen import TritonGenBackend, target_from_options, tune
from bakeoff.backends.tritongen.codegen import generate_all
from bakeoff.backends.tritongen.fusion import fuse
from bakeoff.backends.tritongen.shared import shared_kernels
from bakeoff.workloads.ir import bind
from bakeoff.workloads.lower_torch import TORCH_DTYPES
from bakeoff.workloads.suite import builtin_workloads

STAGES = ("init", "ttir", "ttgir", "llir", "ptx", "cubin")  # init: Triton's frontend (make_ir); cubin: ptxas


class _Sm90Driver:
    """Triton's JIT aimed at sm_90 with no device: target, device 0, stream 0, CUDA's launcher class."""

    def __init__(self, launcher_cls: Any) -> None:
        self.launcher_cls = launcher_cls

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: Any = None) -> int:
        return 0


def aim_at_sm90(scratch: Path) -> list[dict[str, Any]]:
    """Point Triton's JIT at sm_90 and its launcher builds at a stand-in libcuda under `scratch`; returns the
    list that Triton's compilation listener fills with one dict of stage seconds per compile."""
    import triton.backends.nvidia.driver as nvd
    from triton import knobs
    from triton.runtime.driver import driver

    (scratch / "empty.c").write_text("")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(scratch / "libcuda.so.1"), str(scratch / "empty.c")],
                   check=True)
    nvd.library_dirs = lambda: [nvd.libdevice_dir, str(scratch)]
    driver.set_active(_Sm90Driver(nvd.CudaLauncher))
    records: list[dict[str, Any]] = []

    def listener(*, src: Any, metadata: Any, metadata_group: Any, times: Any, cache_hit: bool) -> None:
        if not cache_hit:
            records.append({"name": src.name, "init": times.ir_initialization / 1e6,
                            **{k: v / 1e6 for k, v in times.lowering_stages}})

    knobs.compilation.listener = listener
    return records


def profile(workload: str, dtype: str, preset: str = "gpu", options: dict | None = None) -> dict[str, Any]:
    """Seconds of each host stage of `workload`'s cold compile for sm_90 (the search's timing left out)."""
    import torch


    w = builtin_workloads()[workload]
    t0 = time.perf_counter()
    plan = fuse(bind(w.graph, w.presets[preset], dtype))
    sources = generate_all(plan, target_from_options(TritonGenBackend.parse_options(options or {}), False, dtype, 90))
    runnable = shared_kernels(sources)
    t1 = time.perf_counter()
    modules = tune.load_kernels(runnable, tune.cache_dir())
    t2 = time.perf_counter()
    groups = tune.search_groups(runnable, dtype, "cuda", False, sms=132)
    meta = lambda shape, dt: torch.empty(tuple(int(x) for x in shape), dtype=dt, device="meta")  # noqa: E731
    tensors = {b.name: meta(b.shape, TORCH_DTYPES[b.dtype]) for b in plan.buffers}
    tensors.update({n: meta(s, torch.float32) for n, s in tune.group_scratch(groups, runnable)})
    notes: list[str] = []
    errors = tune.compile_groups(groups, runnable, modules, tensors, notes)
    t3 = time.perf_counter()
    for members, cfgs, _ in groups:
        for i in members:
            tensors.update({n: meta(s, torch.float32) for n, s in tune.config_scratch(runnable[i], cfgs[0])})
            tune.precompile(modules[i], runnable[i], cfgs[0], tensors)
    t4 = time.perf_counter()
    return {"workload": workload, "dtype": dtype, "kernels": len(sources), "searches": len(groups),
            "candidates": sum(len(c) for _, c, _ in groups), "jobs": len(tune.compile_jobs_of(groups, runnable)),
            "errors": [e for errs in errors for e in errs], "fuse_codegen_s": t1 - t0, "import_s": t2 - t1,
            "search_compile_s": t3 - t2, "winners_s": t4 - t3, "total_s": t4 - t0}


def _cpu_s() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("workload")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--preset", default="gpu")
    ap.add_argument("--threads", type=int, default=None, help="compile threads (default: tune.COMPILE_THREADS)")
    ap.add_argument("--options", default="{}", help="tritongen options as JSON")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="tritongen-profile-"))
    os.environ["TRITON_CACHE_DIR"] = str(scratch / "triton")
    os.environ["BAKEOFF_TRITONGEN_CACHE_DIR"] = str(scratch / "tritongen")
    records = aim_at_sm90(scratch)
    if args.threads:
        tune.COMPILE_THREADS = args.threads
    profile("ew_sigmoid_relu", "float32", "smoke")  # the harness's warm-up: Triton's first compile in the process
    records.clear()
    cpu0 = _cpu_s()
    out = profile(args.workload, args.dtype, args.preset, json.loads(args.options))
    out["cpu_s"] = _cpu_s() - cpu0  # this process's threads and its C compiler, ptxas children
    out["compiles"] = len(records)
    out["stage_s"] = {k: sum(r.get(k, 0.0) for r in records) for k in STAGES}
    out["launchers"] = len(list((scratch / "triton").glob("*/__triton_launcher*")))
    if args.json:
        print(json.dumps(out))
        return
    for k, v in out.items():
        print(f"{k:18} {v:.3f}" if isinstance(v, float) else f"{k:18} {v}")


if __name__ == "__main__":
    main()
