"""Kernel attribution: every kernel CUPTI saw in a call (the record's `kernel_times`), mapped to the library
that made it and, where its name allows, to the generated kernel, the graph ops it fuses and its source line;
then the generated kernels the profile did not see (or all of them when there is no profile, as on a CPU)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bakeoff.results.report.kernel_sources import (Generated, inductor_kernels, iree_kernels, onnx_nodes,
                                                   tritongen_kernels, xla_kernels)

# Who made a kernel, from its name alone (first match wins). XLA's fusion kernels come before the GEMM words:
# XLA names its Triton GEMM fusions `gemm_fusion_dot_N`; cuBLAS on Hopper names its GEMMs `nvjet_sm90_...`.
LIBRARIES = ((r"^triton_", "Triton"), (r"^cpp_fused", "C++ (Inductor)"),
             (r"cudnn", "cuDNN"), (r"flash|fmha", "fused attention"),
             (r"onnxruntime", "ONNX Runtime"), (r"__myl|myelin|tensorrt|^trt_", "TensorRT"),
             (r"_dispatch_\d+", "IREE dispatch"), (r"(^|_)fusion(_|$)|^wrapped_", "XLA fusion"),
             (r"gemm|xmma|cutlass|cublas|gemv|wgmma|nvjet|^sm\d+_", "cuBLAS / CUTLASS"),
             (r"at::native|at::", "ATen"))
# The calls into a library that can launch a kernel of that library (a generated entry with calls_library):
# a cuBLAS kernel comes from a matmul call that is not an attention's, a cuDNN or fused-attention kernel from an
# attention or convolution call. (wanted, unwanted), searched in a call's name and origin before what it computes.
_ATTENTION = re.compile(r"cudnn|conv|attention|sdpa|fmha|flash", re.I)
LIBRARY_CALLS = {"cuBLAS / CUTLASS": (re.compile(r"\bmm\b|addmm|bmm|matmul|gemm|dot|cublas", re.I), _ATTENTION),
                 "cuDNN": (_ATTENTION, None), "fused attention": (_ATTENTION, None)}
_DISPATCH = re.compile(r"_dispatch_(\d+)")


@dataclass(frozen=True)
class KernelRow:
    """A row of a case's kernel table: a kernel's `name` and `origin`, and the generated kernel it was tied to
    (`source`, None when not tied; its ops, source line and facts are the row's). `launches`, `device_ms` (per
    call) and `share` (of the call's kernel time) come from the profile and are None for a kernel it did not
    see; `matched` says how the name was tied: 'name', 'dispatch', 'library', 'op type' or '' (not tied)."""

    name: str
    origin: str
    source: Generated | None = None
    launches: float | None = None
    device_ms: float | None = None
    share: float | None = None
    matched: str = ""

    @property
    def fused(self) -> str:
        return self.source.fused if self.source else ""

    @property
    def artifact(self) -> str | None:
        return self.source.artifact if self.source else None

    @property
    def line(self) -> int | None:
        return self.source.line if self.source else None

    @property
    def facts(self) -> str:
        return self.source.facts if self.source else ""

    def to_json(self) -> dict[str, Any]:
        """The row as the report's code view reads it (flat)."""
        return {"name": self.name, "origin": self.origin, "fused": self.fused, "artifact": self.artifact,
                "line": self.line, "facts": self.facts, "launches": self.launches, "device_ms": self.device_ms,
                "share": self.share, "matched": self.matched}


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
    rule = LIBRARY_CALLS.get(library(name))
    if rule is not None:  # a library's kernel: the backend's call into that library
        wanted, unwanted = rule
        for where in (lambda g: f"{g.name} {g.origin}", lambda g: g.fused):
            for g in generated:
                text = where(g)
                if g.calls_library and wanted.search(text) and not (unwanted and unwanted.search(text)):
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
            rows.append(KernelRow(name, origin, g, k.get("launches"), k.get("device_ms"), k.get("share"), how))
        else:
            rows.append(KernelRow(name, lib or str(case.get("backend")), launches=k.get("launches"),
                                  device_ms=k.get("device_ms"), share=k.get("share")))
    rows += [KernelRow(g.name, g.origin, g) for g in generated if g.name not in seen]
    return rows
