"""What each backend leaves for the report to show, and the kernel table built from it: ONNX node lists
before and after ONNX Runtime's optimizations, IREE's dispatch sources, Inductor's output code (CPU)."""
from __future__ import annotations

import pytest

from backend_check import INSTALLED_IN_CI, smoke_graph
from ci_required import skip_or_fail
from bakeoff.backends import get_backend
from bakeoff.backends.base import TensorSpec
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.results.report.kernels import kernel_table


def _compiled_artifacts(backend: str, workload: str = "layernorm_gelu") -> dict:
    b = get_backend(backend)
    reason = b.available()
    if reason:
        skip_or_fail(reason) if backend in INSTALLED_IN_CI else pytest.skip(reason)
    graph = smoke_graph(workload)
    compiled = b.compile(graph, TensorSpec.of_inputs(graph), "cpu", b.Options())
    compiled(*make_inputs(graph, 0, "cpu"))  # the first call: torch.compile compiles here
    return compiled.artifacts()


def _texts(artifacts: dict) -> dict[str, str]:
    return {k: v for k, v in artifacts.items() if isinstance(v, str)}


def test_onnxruntime_saves_its_node_lists_and_the_kernel_table_lists_the_nodes():
    arts = _compiled_artifacts("onnxruntime")
    nodes, optimized = arts["nodes.txt"], arts["optimized_nodes.txt"]
    assert nodes.startswith("graph ") and "LayerNormalization" in nodes and "Gelu" in nodes
    assert "epsilon=" in nodes and "-> (" in nodes and "outputs: " in nodes
    assert optimized.count("\n#") == arts["optimized_nodes"]  # one line per node of the optimized graph
    rows = kernel_table({"adapter": "onnxruntime", "backend": "onnxruntime"}, _texts(arts))
    assert {r.fused.split(" ")[0] for r in rows} >= {"LayerNormalization", "Gelu"}
    assert all(r.artifact == "optimized_nodes.txt" and r.line for r in rows)


def test_iree_saves_each_dispatch_source_and_the_kernel_table_lists_the_dispatches():
    arts = _compiled_artifacts("iree")
    mlir = arts["dispatches.mlir"]
    assert mlir.count("hal.executable.export public @") == arts["dispatch_count"]
    rows = kernel_table({"adapter": "iree", "backend": "iree"}, _texts(arts))
    assert len(rows) == arts["dispatch_count"] and all("_dispatch_" in r.name for r in rows)
    assert all("linalg." in r.fused and "StableHLO lines" in r.fused for r in rows)
    for r in rows:
        assert f"@{r.name}" in mlir.splitlines()[r.line - 1]


def test_inductor_saves_its_output_code_and_the_kernel_table_lists_its_kernels():
    # An earlier graph in the process (as the worker's warm-up graph is) stays out of this graph's output code.
    earlier = _compiled_artifacts("inductor", "softmax")["output_code.py"]
    arts = _compiled_artifacts("inductor", "ew_sigmoid_relu")
    code = arts["output_code.py"]
    assert "def call(" in code and "async_compile" in code, arts.get("output_code_error")
    assert code.count("def call(") == 1 and "# ---- output code" not in code and code != earlier
    assert not {r.name for r in kernel_table({"adapter": "inductor"}, {"output_code.py": earlier})} & {
        r.name for r in kernel_table({"adapter": "inductor"}, {"output_code.py": code})}
    rows = kernel_table({"adapter": "inductor", "backend": "inductor"}, _texts(arts))
    assert rows and all(r.name.startswith("cpp_fused_") and r.origin == "Inductor → C++" for r in rows)
    assert all(code.splitlines()[r.line - 1].startswith(f"{r.name} = async_compile.") for r in rows)
