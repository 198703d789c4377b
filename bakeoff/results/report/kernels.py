"""Kernel attribution: every kernel CUPTI saw in a call (the record's `kernel_times`), mapped to the library
that made it and, where its name allows, to the generated kernel, the graph ops it fuses and its source line;
then the generated kernels the profile did not see (or all of them when there is no profile, as on a CPU)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bakeoff.results.report.kernel_sources import (Generated, inductor_kernels, iree_kernels, onnx_nodes,
                                                   tritongen_kernels, xla_kernels)

# Who made a kernel, from its name alone (first match wins).
LIBRARIES = ((r"^triton_", "Triton"), (r"^cpp_fused", "C++ (Inductor)"),
             (r"cudnn", "cuDNN"), (r"flash|fmha", "fused attention"),
             (r"gemm|xmma|cutlass|cublas|gemv|wgmma|^sm\d+_", "cuBLAS / CUTLASS"),
             (r"onnxruntime", "ONNX Runtime"), (r"__myl|myelin|tensorrt|^trt_", "TensorRT"),
             (r"at::native|at::", "ATen"), (r"_dispatch_\d+", "IREE dispatch"), (r"fusion", "XLA fusion"))
_GEMM_NAME = re.compile(r"gemm|xmma|cutlass|cublas|gemv|wgmma|^sm\d+_", re.I)
_GEMM_SOURCE = re.compile(r"\bmm\b|addmm|bmm|matmul|gemm|dot|cublas", re.I)
_DISPATCH = re.compile(r"_dispatch_(\d+)")


@dataclass(frozen=True)
class KernelRow:
    """A row of a case's kernel table. `launches`, `device_ms` (per call) and `share` (of the call's kernel
    time) come from the profile and are None for a kernel it did not see; `matched` says how the name was
    tied to the generated code: 'name', 'dispatch', 'library', 'op type' or '' (not tied)."""

    name: str
    origin: str
    fused: str = ""
    artifact: str | None = None
    line: int | None = None
    facts: str = ""
    launches: float | None = None
    device_ms: float | None = None
    share: float | None = None
    matched: str = ""


def library(name: str) -> str:
    """The library a kernel name says it comes from, or '' when it says nothing."""
    for pattern, lib in LIBRARIES:
        if re.search(pattern, name, re.I):
            return lib
    return ""


def generated_kernels(case: dict[str, Any], texts: dict[str, str]) -> list[Generated]:
    """The kernels in a case's artifacts, by the kind of artifact found (see kernel_sources)."""
    summary = case.get("artifacts") if isinstance(case.get("artifacts"), dict) else {}
    if "output_code.py" in texts:
        return inductor_kernels(texts["output_code.py"])
    if summary.get("kernels") and isinstance(summary["kernels"], dict):
        return tritongen_kernels(summary, texts)
    if "hlo_optimized" in texts:
        return xla_kernels(texts["hlo_optimized"])
    if "dispatches.mlir" in texts:
        return iree_kernels(texts["dispatches.mlir"])
    origin = "TensorRT (ONNX node)" if case.get("adapter") == "tensorrt" else "ONNX Runtime node"
    for name in ("optimized_nodes.txt", "nodes.txt"):
        if name in texts:
            return onnx_nodes(texts[name], name, origin)
    return []


def _op_stem(op: str) -> str:
    """'LayerNormalization' -> 'layernorm', 'Gelu' -> 'gelu': the part of an op type a kernel name carries."""
    stem = op.split(".")[-1].lower()
    return re.sub(r"(ization|alization|ation)$", "", stem)


def _prefixed(name: str, prefix: str) -> bool:
    """`name` is `prefix` plus a suffix that does not continue its last word ('fusion_1' is not 'fusion_10')."""
    return bool(prefix) and name.startswith(prefix) and not name[len(prefix):len(prefix) + 1].isalnum()


def _match(name: str, generated: list[Generated]) -> tuple[Generated | None, str]:
    for g in generated:
        if name == g.name or name in g.aliases:
            return g, "name"
    for g in generated:
        if any(_prefixed(name, a) for a in (g.name, *g.aliases)):
            return g, "name"
    d = _DISPATCH.search(name)
    if d:
        for g in generated:
            gd = _DISPATCH.search(g.name)
            if gd and gd.group(1) == d.group(1):
                return g, "dispatch"
    if _GEMM_NAME.search(name):  # a cuBLAS/CUTLASS kernel: the backend's call into the library
        for g in generated:
            if g.calls_library and (_GEMM_SOURCE.search(g.name) or _GEMM_SOURCE.search(g.fused)):
                return g, "library"
    low = name.lower()
    for g in generated:
        if g.calls_library and any(len(_op_stem(a)) >= 3 and _op_stem(a) in low for a in g.aliases):
            return g, "op type"
    return None, ""


def kernel_table(case: dict[str, Any], texts: dict[str, str]) -> list[KernelRow]:
    """The profiled kernels, longest first, attributed; then the generated kernels the profile did not see."""
    generated = generated_kernels(case, texts)
    rows: list[KernelRow] = []
    seen: set[str] = set()
    for k in case.get("kernel_times") or []:
        name = str(k.get("name"))
        g, how = _match(name, generated)
        lib = library(name)
        if g is not None:
            seen.add(g.name)
            origin = g.origin if how == "name" or not lib else f"{lib} via {g.origin}"
            rows.append(KernelRow(name, origin, g.fused, g.artifact, g.line, g.facts, k.get("launches"),
                                  k.get("device_ms"), k.get("share"), how))
        else:
            rows.append(KernelRow(name, lib or str(case.get("backend")), launches=k.get("launches"),
                                  device_ms=k.get("device_ms"), share=k.get("share")))
    rows += [KernelRow(g.name, g.origin, g.fused, g.artifact, g.line, g.facts) for g in generated
             if g.name not in seen]
    return rows
