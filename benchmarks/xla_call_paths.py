"""XLA's host cost per call by call path, on a GPU (issue 11): the AOT-compiled executable bakeoff times, or
`jax.jit`'s own dispatch, each called on DLPack aliases of torch tensors or on XLA's own copies of them (what
backends/xla.py prepare() now hands over). Prints ms per call: single (block_until_ready after each call),
single with torch.cuda.synchronize() as well (bakeoff's single-call figure also synchronizes torch), and
pipelined (100 calls, one block). Usage: python benchmarks/xla_call_paths.py (repo root, on the GPU machine)."""
import statistics, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import jax, jax.numpy as jnp, torch
from bakeoff.backends import get_backend
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads
from bakeoff.workloads.lower_jax import lower_jax

for wl in ("ew_sigmoid_relu", "layernorm_gelu"):
    w = builtin_workloads()[wl]
    graph = bind(w.graph, w.presets["gpu"], "bfloat16")
    inputs = make_inputs(graph, 0, "cuda")
    comp = get_backend("xla").compile(graph, [], "cuda", {})
    dl = tuple(jax.dlpack.from_dlpack(t.contiguous()) for t in inputs)  # aliases of the torch tensors
    cp = comp.prepare(inputs)  # XLA's own copies, as the adapter hands them over
    jitted = jax.jit(lower_jax(graph, "native", "cuda"))
    exe = comp.executable
    paths = {"compiled+dlpack": (exe, dl), "compiled+copy": (exe, cp), "jit+dlpack": (jitted, dl), "jit+copy": (jitted, cp)}
    for fn, args in paths.values():
        for _ in range(20):
            jax.block_until_ready(fn(*args))
    res = {}
    for trial in range(7):
        for name, (fn, args) in paths.items():
            t = time.perf_counter()
            for _ in range(50):
                jax.block_until_ready(fn(*args))
            single = (time.perf_counter() - t) / 50 * 1e3
            t = time.perf_counter()
            for _ in range(50):
                jax.block_until_ready(fn(*args)); torch.cuda.synchronize()
            single_ts = (time.perf_counter() - t) / 50 * 1e3
            t = time.perf_counter()
            last = None
            for _ in range(100):
                last = fn(*args)
            jax.block_until_ready(last)
            pipe = (time.perf_counter() - t) / 100 * 1e3
            res.setdefault(name, []).append((single, single_ts, pipe))
    print(f"\n{wl} (ms/call, median of 7)   single   single+torch.sync   pipelined")
    for name, v in res.items():
        print(f"  {name:18s} {statistics.median(x[0] for x in v):8.4f} {statistics.median(x[1] for x in v):10.4f} {statistics.median(x[2] for x in v):12.4f}")
