"""The one-time cost of a backend's first compile in a process, timed apart from the case's own graph.

A fresh worker pays, on its backend's first compile, for imports, the compiler's start (Inductor's compile
worker pool, JAX's client, TensorRT's builder, Triton's launcher stubs) and the device context. Before the
case's graph, the worker compiles and runs a tiny graph unrelated to any workload with the same backend and
options, and records that span as `compile_process_setup_s`; the case's compile that follows is the graph's
own. The tiny graph cannot feed the case's cold compile from a cache: it differs from the case's graph (its
digest is checked, and its shape, 3 x 5, and constant, 0.8125, appear in no workload), and the files it
writes to the case's cache folders are counted (`cache_files_setup`) so the case's counts exclude them.
"""
from __future__ import annotations

import time
from typing import Any

from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import Graph, bind
from bakeoff.backends.base import TensorSpec
from bakeoff.backends.options import BackendOptions
from bakeoff.harness.worker.input_tensors import make_inputs

SETUP_SHAPE = (3, 5)
SETUP_CONSTANT = 0.8125
# Options that write files outside the cache folders: the tiny graph must not leave artifacts behind.
_ARTIFACT_OPTIONS = ("artifacts_dir",)


def setup_graph(dtype: str, avoid_digest: str | None = None) -> Graph:
    """The tiny warm-up graph, tanh(x) * 0.8125 - x on a 3 x 5 input in `dtype` (bound); a variant with
    another shape in the unlikely case that its digest is `avoid_digest` (the case's own graph)."""
    for rows in (SETUP_SHAPE[0], SETUP_SHAPE[0] + 4):
        b = GraphBuilder("bakeoff_process_setup")
        x = b.input("x", (rows, SETUP_SHAPE[1]), init=("normal", 1.0))
        graph = bind(b.finish([b.sub(b.mul(b.tanh(x), b.const(SETUP_CONSTANT)), x)]), {}, dtype)
        if graph.digest() != avoid_digest:
            return graph
    raise AssertionError("unreachable: two graphs of different shapes share a digest")


def setup_graph_for(case_graph: Graph) -> Graph:
    """The tiny warm-up graph for a case of `case_graph`: in the dtype of its first input, never its digest."""
    dtype = next((n.dtype for n in case_graph.inputs), "float32")
    return setup_graph(dtype, case_graph.digest())


def without_artifacts(options: BackendOptions) -> BackendOptions:
    """`options` with each of _ARTIFACT_OPTIONS the backend has set back to its default."""
    fields = type(options).model_fields
    defaults = {k: fields[k].get_default(call_default_factory=True) for k in _ARTIFACT_OPTIONS if k in fields}
    return options.model_copy(update=defaults) if defaults else options


def warm_up_process(backend: Any, case: Any, case_graph: Graph, count_files: Any, phase: str = "") -> dict[str, Any]:
    """Compile, prepare and run the tiny graph once with `backend` and the case's options; returns
    `compile_process_setup{phase}_s` (seconds) and `cache_files_setup{phase}` (files it wrote in the cache
    folders), or `compile_process_setup{phase}_error` when it failed (the case then runs as it would have
    without it). `phase` is "" in the cold worker and "_warm" in the warm one."""
    graph = setup_graph_for(case_graph)
    options = without_artifacts(case.options)
    grad = bool(getattr(case, "grad", False))  # a training step warms up the backward's compiler too
    before = count_files(backend.cache_env)
    t0 = time.perf_counter()
    try:
        inputs = make_inputs(graph, 0, case.device, grad=grad)
        compiled = backend.compile_case(graph, TensorSpec.of_inputs(graph), case.device, options, grad)
        compiled.run(compiled.prepare(inputs))
        compiled.sync()
    except Exception as exc:  # the case's own compile reports its failure; this costs only the split
        return {f"compile_process_setup{phase}_error": f"{type(exc).__name__}: {exc}"[:500]}
    seconds = time.perf_counter() - t0
    out = {f"compile_process_setup{phase}_s": seconds,
           f"cache_files_setup{phase}": count_files(backend.cache_env) - before}
    if not phase:  # the same for both processes: said once, by the cold one
        out["compile_setup_in_case_reason"] = type(backend).warmup_in_case_reason
    return out
