"""Shape sweeps served with one compile by IREE (a module with `?` dims) and tritongen (kernels with the swept
dim a runtime argument), CPU at smoke sizes: the symbolic export and its fallback, the SymDim binding, Triton's
cache count, and one sweep of each through the CLI with numerics checked at every point. TensorRT's
optimization profile is tested against the stub tensorrt in test_backend_tensorrt.py."""
from __future__ import annotations

import json
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere in this process

import pytest

from conftest import bakeoff

from bakeoff.backends import get_backend
from bakeoff.backends.options import NoOptions
from bakeoff.backends.sweep_server import PerShapeServer, SweepSpec
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.suite import every_workload


def _spec(workload: str, dim: str, values, dtype: str = "float32") -> SweepSpec:
    w = every_workload()[workload]
    return SweepSpec(w.graph, dict(w.presets["smoke"]), dim, tuple(values), dtype)


def _served(server, spec):
    """Each value served in order: (value, max abs error against eager, compiles so far)."""
    out = []
    for value in spec.values:
        graph = spec.bound_at(value)
        xs = make_inputs(graph, 0, "cpu")
        want = get_backend("eager").compile(graph, [], "cpu", NoOptions())(*xs)
        got = server.at(value, graph, [])(*xs)
        assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want]
        out.append((value, max(float((g - w).abs().max()) for g, w in zip(got, want)), server.compiles()))
    return out


def test_symbolic_stablehlo_has_the_swept_dim_dynamic():
    pytest.importorskip("jax")
    from bakeoff.workloads.lower_jax_dynamic import mark_nonexpanding, symbolic_stablehlo

    spec = _spec("attention", "S", [16, 40])
    text = symbolic_stablehlo(spec.graph, "S", spec.base, "float32", "cpu")
    assert "tensor<1x2x?x16xf32>" in text.split("func.func public @main", 1)[1].split("\n", 1)[0]
    assert "dynamic_reshape" not in text   # matmuls as dot_general, no flattening reshapes
    assert "known_nonexpanding_dimensions" in text
    line = ("%4 = stablehlo.dynamic_broadcast_in_dim %1, %3, dims = [0] : (tensor<?xf32>, tensor<2xi32>) -> "
            "tensor<?x1xf32>")
    assert "{known_nonexpanding_dimensions = array<i64: 0>} :" in mark_nonexpanding(line)
    static = line.replace("tensor<?xf32>", "tensor<4xf32>")
    assert mark_nonexpanding(static) == static   # a static operand axis may expand: left alone


def test_iree_serves_a_sweep_from_one_module_and_falls_back_with_the_reason():
    if get_backend("iree").available():
        pytest.skip(get_backend("iree").available())
    spec = _spec("layernorm_gelu", "M", [16, 24, 40, 16])
    server = get_backend("iree").serve_sweep(spec, "cpu", get_backend("iree").Options())
    assert "one module" in server.how and "vmfb" in server.counter
    served = _served(server, spec)
    assert all(err < 1e-4 for _, err, _ in served), served
    assert [c for *_, c in served] == [1, 1, 1, 1]
    assert "?x300" in server.compiled.artifacts()["stablehlo"]
    # attention whose head dim is swept: its scale must be a number, so no symbolic module; one per shape
    b = GraphBuilder("attn_d")
    q, k, v = (b.input(n, ("B", "H", "S", "Dh")) for n in "qkv")
    graph = b.finish([b.sdpa(q, k, v, causal=True)])
    per_shape = get_backend("iree").serve_sweep(SweepSpec(graph, {"B": 1, "H": 2, "S": 16}, "Dh", (8, 16),
                                                          "float32"), "cpu", get_backend("iree").Options())
    assert isinstance(per_shape, PerShapeServer)
    assert "one compile per shape: no StableHLO with Dh dynamic: attention's head dim" in per_shape.how


def test_symdim_prints_expressions_and_computes_values():
    from bakeoff.backends.tritongen.symdim import SymDim

    s = SymDim(40, "dim_M")
    assert f"{s * 300}" == "(dim_M * 300)" and s * 300 == 12000 and isinstance(300 * s, SymDim)
    assert f"{-(-s // 16)}" == "(-((-dim_M) // 16))" and -(-s // 16) == 3
    assert s * 1 is s and s + 0 is s and f"{s:d}" == "40" and int(s) == 40 and type(int(s)) is int
    assert s.bit_length() == 6 and s > 32 and float(s) == 40.0   # decisions see the value


def test_tritongen_one_source_per_distinct_text_counted_from_the_sweep():
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("the CPU path needs Triton's interpreter")
    spec = _spec("layernorm_gelu", "M", [16, 24, 40, 16])
    server = get_backend("tritongen").serve_sweep(spec, "cpu", get_backend("tritongen").Options())
    served = _served(server, spec)
    assert all(err < 1e-4 for _, err, _ in served), served
    assert [c for *_, c in served] == [1, 1, 1, 1]   # rows are a runtime argument: one source serves them all
    text = server.at(24, spec.bound_at(24), []).artifacts()["k0_rowreduce.py"]
    assert "dim_M, BLOCK_M: tl.constexpr" in text and "rmask = r < dim_M" in text
    assert server.point_facts() == {"kernel_sources_so_far": 1, "triton_compiles_so_far": None}
    # the row length sets the block size and the column mask: another text, so another source
    spec = _spec("softmax", "N", [16, 24, 16])
    server = get_backend("tritongen").serve_sweep(spec, "cpu", get_backend("tritongen").Options())
    served = _served(server, spec)
    assert all(err < 1e-5 for _, err, _ in served) and [c for *_, c in served] == [1, 2, 2], served


def test_triton_compiles_are_read_from_the_jit_functions_caches():
    pytest.importorskip("triton")
    from types import ModuleType

    from triton.runtime.jit import JITFunction

    from bakeoff.backends.tritongen.sweep import triton_cache_entries

    def kernel(x):
        pass

    module = ModuleType("m")
    module.k0 = JITFunction(kernel)
    module.k0_rows = JITFunction(kernel)
    module.helper = len
    # Triton's layout: device -> (kernel_cache, kernel_key_cache, target, backend, binder)
    module.k0.device_caches = {0: ({"a": 1, "b": 2}, {}, None, None, None)}
    module.k0_rows.device_caches = {0: ({"c": 3}, {}, None, None, None), 1: ({}, {}, None, None, None)}
    assert triton_cache_entries(module) == 3
    assert triton_cache_entries(ModuleType("none")) is None


CONFIG = """
name: sweep-adapters
device: cpu
preset: smoke
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.1, min_reps: 3}
timeout_s: 300
workloads:
  - name: layernorm_gelu
    sweep: {dim: M, values: [16, 24, 40, 16]}
backends:
  iree: {}
  tritongen: {}
"""


def test_iree_and_tritongen_sweeps_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("BAKEOFF_PRESTART", "0")
    (tmp_path / "sweep.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 's.db'}"
    run = bakeoff("run", "sweep.yaml", "--db", db, cwd=tmp_path, timeout=900)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    got = {(r["workload"], r["backend"]): r for r in records}
    for r in records:
        assert r["status"] == "ok", (r["case_id"], r["reason"])
        assert all(p["status"] == "ok" and p["err_rel_l2_vs_fp64"] is not None and p["checked_seeds"] == [0, 1]
                   and p["headline_ms"] > 0 for p in r["sweep"]), r["sweep"]
    iree = got[("layernorm_gelu", "iree")]
    assert iree["sweep_compiles"] == 1 and "dynamic (?) dim" in iree["sweep_serving"]
    assert [p["recompiled"] for p in iree["sweep"]] == [False] * 4   # compiled once, in the setup
    tg = got[("layernorm_gelu", "tritongen")]
    assert tg["sweep_compiles"] == 1 and "runtime integer argument" in tg["sweep_serving"]
    assert [p["recompiled"] for p in tg["sweep"]] == [True, False, False, False]
    assert [p["kernel_sources_so_far"] for p in tg["sweep"]] == [1, 1, 1, 1]
    assert all(p["triton_compiles_so_far"] is None for p in tg["sweep"])   # interpreter: GPU-only figure
    shown = bakeoff("show", "--db", db, cwd=tmp_path, check=True).stdout
    assert "sweep layernorm_gelu/M=sweep[16..40],N=300/float32/iree: 1 compile" in shown, shown
