"""What XLA's GPU autotuner times while compiling each graph, from XLA's own dump of its results.

`XlaBackend.graph_compile_times_on_device` lets an elementwise forward graph (the process warm-up's tiny graph,
the elementwise workloads) compile beside other cases' timing: this checks that XLA autotuned nothing for
them, and that it did for graphs that keep the gate. Each graph compiles in a fresh process (XLA reads
XLA_FLAGS once) through bakeoff's own XLA adapter, with `--xla_gpu_dump_autotune_results_to=FILE.textproto`
(the config XLA chose per fusion: `entries`, and the backends chosen) and `--xla_gpu_dump_autotune_logs_to`
(every candidate it ran and timed: `run_time` in the logs).

    python benchmarks/xla_autotune_check.py [--dtype bfloat16] [--preset gpu]   # on a GPU machine, repo root
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GRAPHS = ("process_setup", "ew_sigmoid_relu", "ew_gelu_silu_gate", "layernorm_gelu", "softmax", "gemm_bias_gelu",
          "attention")


def _graph(name: str, preset: str, dtype: str):
    from bakeoff.harness.worker.process_setup import setup_graph
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.suite import builtin_workloads

    if name == "process_setup":
        return setup_graph(dtype)
    w = builtin_workloads()[name]
    return bind(w.graph, w.presets[preset], dtype)


def _one(name: str, preset: str, dtype: str, dump: str) -> dict:
    """Compile and run `name` once with the dump flag (this process); what XLA wrote."""
    from bakeoff.backends import backend_class, get_backend
    from bakeoff.backends.base import TensorSpec
    from bakeoff.harness.worker.input_tensors import make_inputs

    graph = _graph(name, preset, dtype)
    t0 = time.perf_counter()
    backend = get_backend("xla")
    logs = dump + ".logs.textproto"
    compiled = backend.compile(graph, TensorSpec.of_inputs(graph), "cuda",
                               {"xla_flags": f"--xla_gpu_dump_autotune_results_to={dump} "
                                             f"--xla_gpu_dump_autotune_logs_to={logs}"})
    compiled.run(compiled.prepare(make_inputs(graph, 0, "cuda")))
    compiled.sync()
    text = Path(dump).read_text() if Path(dump).exists() else ""
    log_text = Path(logs).read_text() if Path(logs).exists() else ""
    holds = backend_class("xla").graph_compile_times_on_device(graph, {})
    return {"graph": name, "compile_s": round(time.perf_counter() - t0, 2),
            "entries": text.count("entries {"), "chosen": sorted(set(re.findall(r"backend: (\w+)", text))),
            "timed_candidates": log_text.count("run_time"), "bakeoff_holds_gate": holds is not None,
            "logs_head": log_text[:400]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--preset", default="gpu")
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--dump", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(_one(a.one, a.preset, a.dtype, a.dump)))
        return 0
    rows, wrong = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in GRAPHS:
            dump = str(Path(tmp, f"{name}.textproto"))
            proc = subprocess.run([sys.executable, __file__, "--one", name, "--dump", dump, "--dtype", a.dtype,
                                   "--preset", a.preset], capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                rows.append({"graph": name, "error": proc.stderr.strip()[-400:]})
                wrong += 1
                continue
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            # A graph compiled beside timers must have nothing autotuned.
            row["consistent"] = row["bakeoff_holds_gate"] or row["timed_candidates"] == 0
            wrong += not row["consistent"]
            rows.append(row)
    print(f"{'graph':<20} {'holds gate':>10} {'entries':>7} {'timed':>5} {'compile s':>9}  consistent  chosen")
    for r in rows:
        if "error" in r:
            print(f"{r['graph']:<20} error: {r['error']}")
            continue
        print(f"{r['graph']:<20} {str(r['bakeoff_holds_gate']):>10} {r['entries']:>7} {r['timed_candidates']:>5} "
              f"{r['compile_s']:>9}  {str(r['consistent']):<10}  {','.join(r['chosen'])}")
    print(json.dumps(rows))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
