"""tritongen: bakeoff's own Triton code generator (fusion -> codegen -> compile/tune -> launch).

Triton is imported lazily: this package imports without it. On the CPU kernels run in Triton's interpreter,
which needs TRITON_INTERPRET=1 in the environment before compile (read at compile time, not import time).
Options: `TritonGenOptions` below (`bakeoff list backends --options`). fp32_dot says how float32 matmul and
attention products run on the GPU: auto and tf32x3 split the operands once into TF32 hi/lo planes and run three
TF32 products on the tensor cores at float32 accuracy (searched first; Triton's in-kernel tf32x3 for attention
and SIMT float32 for matmul are the fallbacks the search also times), ieee is SIMT float32 only, tf32 is plain
TF32, faster and less accurate (the record's notes name what each kernel kind used). search: "pruned" (the few configs per kernel kind that won on the H200) or "wide" (the
whole space, slower to compile); winners are cached either way.
"""
from __future__ import annotations

import os
from typing import Any, Literal, Sequence

from pydantic import Field

from bakeoff.backends.base import Backend, Compiled, TensorSpec, dist_version
from bakeoff.backends.options import BackendOptions
from bakeoff.workloads.ir import Graph

_NO_TRITON = "triton not installed (pip install 'bakeoff[triton]')"
_NO_INTERP = ("on the CPU tritongen needs TRITON_INTERPRET=1 (Triton's interpreter) set before triton is "
              "imported; the harness sets it in its workers")


class TritonGenOptions(BackendOptions):
    autotune: bool = Field(True, description="search kernel configs by timing them (GPU only; the interpreter "
                                             "takes the first)")
    max_row_block: int = Field(16384, ge=1, le=2**24,
                               description="elements: the longest row a reduction keeps in one tile; longer "
                                           "rows loop over tiles")
    matmul_tma: bool = Field(True, description="GPU: also try matmul and attention tiles loaded through TMA "
                                               "descriptors")
    fp32_dot: Literal["auto", "tf32x3", "ieee", "tf32"] = Field(
        "auto", description="float32 matmul/attention products on the GPU: auto or tf32x3 (3xTF32 on operands "
                            "pre-split into TF32 planes, float32-accurate), ieee (SIMT), tf32 (plain TF32: faster, "
                            "less accurate)")
    search: Literal["pruned", "wide"] = Field("pruned", description="config search: the few winners per kernel "
                                                                    "kind (pruned) or the whole space (wide)")


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


class TritonGenBackend(Backend):
    name = "tritongen"
    grad_reason = ("has no backward: its kernels (fusion.py -> codegen_*.py) are forward-only, and it generates no "
                   "reverse-mode kernels")
    cache_env = ("BAKEOFF_TRITONGEN_CACHE_DIR", "TRITON_CACHE_DIR")
    timed_with_events = True   # Triton launches on torch's current CUDA stream
    graph_capturable = True
    marks_device_work = True  # the config search: candidates compile as host work, their timing is device work
    Options = TritonGenOptions
    warmup_in_case_reason = ("Triton writes its launcher stubs and kernels under TRITON_CACHE_DIR; that a change "
                             "of the folder after the warm-up reaches every file it writes is not verified on a "
                             "GPU, so the warm-up stays where its files are counted apart (cache_files_setup)")

    @classmethod
    def compile_times_on_device(cls, options: TritonGenOptions) -> str | None:
        if options.autotune:
            return ("its config search times candidate kernels on the device (autotune: true): that timing has "
                    "the device alone, compiling the candidates does not hold the gate")
        return None

    @classmethod
    def version(cls) -> str | None:
        return dist_version("triton")

    @classmethod
    def available(cls) -> str | None:
        try:
            import triton  # noqa: F401
        except ImportError:
            return _NO_TRITON
        return None

    @classmethod
    def worker_env(cls, device: str) -> dict[str, str]:
        # Triton kernels run on the CPU only through its interpreter, which is chosen when triton is imported.
        return {"TRITON_INTERPRET": "1"} if device == "cpu" else {}

    def supports(self, graph: Graph, device: str, dtype: str, options: TritonGenOptions | None = None) -> str | None:
        reason = super().supports(graph, device, dtype, options)
        if reason:
            return reason
        if any(n.dtype == "float64" for n in graph.nodes):
            return "tritongen does not generate float64 kernels"
        from bakeoff.backends.tritongen.fusion import fuse

        # Planning time: never raise. An op or layout tritongen has no rule for is a skip; anything else is left
        # for compile() to raise again, so it is recorded as this case's compile_error, not a crashed plan.
        try:
            fuse(graph)
        except NotImplementedError as exc:
            return str(exc)
        except Exception:
            return None
        return None

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: TritonGenOptions) -> Compiled:
        from bakeoff.backends.tritongen.pipeline import compile_graph

        dtype = next((n.dtype for n in graph.inputs), "float32")
        return compile_graph(graph, device, *_setup(options, device, dtype))

    def serve_sweep(self, spec: Any, device: str, options: TritonGenOptions) -> Any:
        """Kernels that take the swept dim as a runtime argument (tritongen/sweep.py)."""
        from bakeoff.backends.tritongen.sweep import TritonGenSweepServer

        return TritonGenSweepServer(spec, device, *_setup(options, device, spec.dtype))


def _setup(opts: TritonGenOptions, device: str, dtype: str) -> tuple[Any, bool, str]:
    """(codegen target, whether to run the GPU config search, device name) for a compile on `device`; refuses
    the CPU without Triton's interpreter."""
    interpret = _interpreting()
    if device == "cpu" and not interpret:
        raise RuntimeError(_NO_INTERP)
    arch = None
    if interpret:
        device_name = "triton-interpreter"
    else:
        import torch

        device_name = torch.cuda.get_device_name(torch.device(device))
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        arch = 10 * major + minor
    return target_from_options(opts, interpret, dtype, arch), opts.autotune and not interpret, device_name


def target_from_options(opts: TritonGenOptions, interpret: bool, dtype: str, arch: int | None = None):
    """The CodegenTarget that the options `opts` ask for."""
    from bakeoff.backends.tritongen.source import CodegenTarget

    # TMA twins only for the GPU: the interpreter's search is one fixed config, which never picks them
    return CodegenTarget(interpret, dtype, opts.max_row_block, opts.matmul_tma and not interpret, opts.fp32_dot,
                         opts.search, arch)
