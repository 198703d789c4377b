"""JAX/XLA: the graph's JAX lowering (`workloads.lower_jax`), jit-compiled ahead of time for one device.

Compile is `jax.jit(f).trace(specs).lower().compile()`, each stage timed apart. Inputs cross from torch to
JAX by DLPack on the device in `prepare`, copied into XLA buffers of their own; outputs come back by DLPack
(zero-copy) in `to_torch`, outside the timed call. The timed call is the executable's own (C++) call on the
prepared arrays, and `sync` is `jax.block_until_ready` on its outputs: what JAX's own loop times.

Options (YAML `backends: {xla: {...}}`): `XlaOptions` below; `xla_flags` is put in XLA_FLAGS before JAX is
imported; `attention`: "native" (default: jax.nn.dot_product_attention, cuDNN's fused attention on a GPU in
16-bit floats, see workloads.lower_jax) or "decomposed" (matmul, mask, softmax, matmul). A cuDNN build that
fails falls back to JAX's XLA attention, with the reason in the compile notes; the route taken is
`info.lowering`.
Cache: set JAX_COMPILATION_CACHE_DIR to use JAX's persistent compilation cache there (every entry kept).
GPU memory: XLA_PYTHON_CLIENT_PREALLOCATE defaults to false here, since torch allocates on the same GPU.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import sys
import time
from typing import Any, Literal, Sequence

from pydantic import Field, field_validator

from bakeoff.workloads.ir import Graph
from bakeoff.workloads.lower_jax import (input_specs, lower_jax, lower_jax_grad, lowering_paths, sdpa_routes,
                                         share_gpu_with_torch)
from bakeoff.workloads.ops import kind

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec
from bakeoff.backends.options import BackendOptions, clip
from bakeoff.backends.sweep_server import SweepServer
from bakeoff.workloads.padding import padding_refusal, sliced_axes

# Op kinds (workloads/ops.py) that XLA's GPU autotuner has nothing to time in.
_UNTUNED_KINDS = ("source", "unary", "binary", "layout")
_FLAG = re.compile(r"--[A-Za-z0-9_]+(=\S*)?")


class XlaOptions(BackendOptions):
    xla_flags: str | None = Field(None, max_length=4000,
                                  description="XLA_FLAGS for the case's worker, e.g. --xla_gpu_autotune_level=4 "
                                              "(set before jax is imported)")

    @field_validator("xla_flags")
    @classmethod
    def _flags(cls, flags: str | None) -> str | None:
        # XLA aborts the whole process on a malformed XLA_FLAGS; its flag names are known only once it starts.
        for token in (flags or "").split():
            if not _FLAG.fullmatch(token):
                raise ValueError(f"each XLA flag is --name or --name=value, not {clip(token)!r}")
        return flags

    attention: Literal["native", "decomposed"] = Field(
        "native", description="native: jax.nn.dot_product_attention (cuDNN's fused attention on a GPU in 16-bit "
                              "floats); decomposed: matmul, mask, softmax, matmul")
    shapes: Literal["recompile", "bucket"] = Field(
        "recompile", description="a shape sweep: recompile (one jit compile per shape) or bucket (pad the swept "
                                 "dim to the next power of two, one compile per bucket; only where padding is "
                                 "sound for the graph)")


_CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"
_cache_hits = 0  # persistent-cache hits in this process, counted from JAX's monitoring events
_listening = False


def _count_cache_hit(event: str, **_: Any) -> None:
    global _cache_hits
    if event == "/jax/compilation_cache/cache_hits":
        _cache_hits += 1


def _apply_xla_flags(flags: str | None) -> None:
    """Put `flags` in XLA_FLAGS. XLA reads it once, when JAX starts, so it must precede `import jax`."""
    if flags is None:
        return
    if "jax" not in sys.modules:
        os.environ["XLA_FLAGS"] = flags
    elif os.environ.get("XLA_FLAGS", "") != flags:
        raise RuntimeError(f"xla: option xla_flags={flags!r} cannot take effect: jax is already imported in "
                           f"this process with XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; run the case in "
                           "a fresh process or export XLA_FLAGS before starting Python")


def _enable_persistent_cache() -> str | None:
    """Point JAX's persistent compilation cache at $JAX_COMPILATION_CACHE_DIR, caching every entry.

    With the variable unset (or emptied since an earlier compile in this process) the cache is off.
    """
    import jax

    path = os.environ.get(_CACHE_ENV) or None
    if jax.config.jax_compilation_cache_dir != path:
        jax.config.update("jax_compilation_cache_dir", path)
        # JAX opens the cache once per process; start over so a changed folder takes effect.
        from jax.experimental.compilation_cache import compilation_cache

        compilation_cache.reset_cache()
    if path is None:
        return None
    # Defaults skip compiles under 1 s; keep everything so a second process always hits.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    # -1 = no size floor and no filesystem-specific override (0 lets JAX substitute its own floor).
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return path


def _jax_device(device: str) -> Any:
    """The jax Device for "cpu", "cuda" or "cuda:N" (N as torch numbers the visible GPUs)."""
    import jax

    if device == "cpu":
        return jax.devices("cpu")[0]
    if device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        try:
            gpus = jax.devices("gpu")
        except RuntimeError as e:
            raise RuntimeError(f"xla: jax has no GPU backend here ({e}); pip install 'jax[cuda13]' (the "
                               "project's `cuda` extra)") from e
        return gpus[index]
    raise ValueError(f"xla: unknown device {device!r}")


def fusion_count(hlo: str) -> int:
    """Top-level `fusion` instructions in optimized HLO text (each is one kernel, give or take).

    Fusions nested inside another fusion's computation are not counted: they belong to that kernel.
    """
    fusion = re.compile(r"\s(?:\S+\s+)?fusion\(.*?calls=(%?[\w.\-]+)")
    called: set[str] = set()
    computations: dict[str, list[str]] = {}
    current = None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY\s+)?(%?[\w.\-]+)\s.*\{\s*$", line)
        if head and not line.startswith(" "):
            current = head.group(1).lstrip("%")
            computations[current] = []
        elif current is not None and " fusion(" in line:
            computations[current].append(line)
            m = fusion.search(line)
            if m:
                called.add(m.group(1).lstrip("%"))
    return sum(len(lines) for name, lines in computations.items() if name not in called)


_CUDNN_FMHA = "__cudnn$fmha"


def _build(jax: Any, fn: Any, arg_specs: list) -> tuple[dict[str, float], Any, Any]:
    """jit, trace, lower and compile `fn` for `arg_specs`: (seconds per stage, lowered, executable)."""
    jitted = jax.jit(fn)
    t0 = time.perf_counter()
    traced = jitted.trace(*arg_specs)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    executable = lowered.compile()
    t3 = time.perf_counter()
    return {"trace": t1 - t0, "lower": t2 - t1, "compile": t3 - t2}, lowered, executable


class XlaCompiled(Compiled):
    """An XLA executable for one device; inputs and outputs are jax arrays."""

    def __init__(self, executable: Any, info: CompileInfo, artifacts: dict[str, Any]) -> None:
        self.executable = executable
        self.info = info
        self._artifacts = artifacts
        self._last: Any = None

    def prepare(self, inputs: Sequence[Any]) -> tuple:
        import jax
        import jax.numpy as jnp

        # DLPack brings the torch tensor over on its device (no host round trip); the copy then gives XLA
        # buffers of its own, as a JAX program's arrays are: calls on the DLPack aliases themselves cost more
        # host time per call than JAX's own loop on the same executable (docs/EVIDENCE.md, "XLA's call paths").
        arrays = tuple(jnp.array(jax.dlpack.from_dlpack(t.contiguous()), copy=True) for t in inputs)
        return jax.block_until_ready(arrays)

    def run(self, prepared: Any) -> Any:
        # Returns as soon as XLA has enqueued the work (asynchronous dispatch); sync() waits.
        self._last = self.executable(*prepared)
        return self._last

    def sync(self) -> None:
        import jax

        if self._last is not None:
            jax.block_until_ready(self._last)

    def to_torch(self, raw: Any) -> list[Any]:
        import torch

        return [torch.from_dlpack(x) for x in raw]

    def artifacts(self) -> dict[str, Any] | None:
        return self._artifacts


class XlaBackend(Backend):
    name = "xla"
    cache_env = (_CACHE_ENV,)
    Options = XlaOptions

    @classmethod
    def compile_times_on_device(cls, options: XlaOptions) -> str | None:
        """XLA's GPU autotuner times GEMM and fusion candidates while compiling, unless
        --xla_gpu_autotune_level=0 is in the case's xla_flags."""
        flags = (options.xla_flags or "").split()
        if "--xla_gpu_autotune_level=0" in flags:
            return None
        return "XLA's GPU autotuner times GEMM and fusion candidates on the device while compiling"

    @classmethod
    def graph_compile_times_on_device(cls, graph: Graph, options: XlaOptions, grad: bool = False) -> str | None:
        """None for a forward graph of elementwise and layout ops only (the process warm-up's tiny graph, the
        elementwise workloads): XLA's autotuner times GEMMs, convolutions and fused attention (their
        algorithms, tactics and Triton tilings), and such a graph compiles to loop fusions, none of which it
        tunes (docs/EVIDENCE.md: XLA's own dump of what it autotuned). Reductions keep
        the gate: XLA may emit and tune them as Triton fusions."""
        if not grad and all(kind(n.op) in _UNTUNED_KINDS for n in graph.nodes):
            return None
        return cls.compile_times_on_device(options)
    grad = True
    warmup_in_case_reason = ("JAX reads its persistent compilation cache's folder once per process, when the "
                             "cache is first used: a warm-up in a folder of its own would put the case's "
                             "executables there")

    @classmethod
    def available(cls) -> str | None:
        # find_spec, not import: importing jax here would freeze XLA_FLAGS before compile() sees options.
        if importlib.util.find_spec("jax") is None or importlib.util.find_spec("jaxlib") is None:
            return "jax not installed (pip install 'bakeoff[xla]')"
        return None

    @classmethod
    def version(cls) -> str | None:
        try:
            return f"jax {importlib.metadata.version('jax')}, jaxlib {importlib.metadata.version('jaxlib')}"
        except importlib.metadata.PackageNotFoundError:
            return None

    def sweep_refusal(self, spec: Any, options: XlaOptions | None = None) -> str | None:
        if options is None or options.shapes != "bucket":
            return None
        reason = padding_refusal(spec.graph, spec.dim)
        return f"xla shapes=bucket: padding {spec.dim} is not sound here: {reason}" if reason else None

    def serve_sweep(self, spec: Any, device: str, options: XlaOptions) -> SweepServer:
        return XlaSweepServer(spec, device, options)

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: XlaOptions) -> Compiled:
        return self._compile(graph, device, options, grad=False)

    def compile_grad(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                     options: XlaOptions) -> Compiled:
        """jax.jit of the jax.vjp-based step (workloads.lower_jax.lower_jax_grad), compiled like the forward."""
        return self._compile(graph, device, options, grad=True)

    def _compile(self, graph: Graph, device: str, opts: XlaOptions, grad: bool) -> Compiled:
        attention = opts.attention
        _apply_xla_flags(opts.xla_flags)
        share_gpu_with_torch()
        import jax
        from jax.sharding import SingleDeviceSharding

        global _listening
        cache_dir = _enable_persistent_cache()
        if cache_dir and not _listening:
            jax.monitoring.register_event_listener(_count_cache_hit)
            _listening = True
        hits_before = _cache_hits

        # Argument specs carry the target device, so XLA compiles for it (CPU or one GPU).
        arg_specs = input_specs(graph, SingleDeviceSharding(_jax_device(device)), grad=grad)
        lower = lower_jax_grad if grad else lower_jax
        platform = "cuda" if device.startswith("cuda") else "cpu"
        notes: list[str] = []
        paths = lowering_paths(graph, attention, platform)
        cudnn = "cudnn" in sdpa_routes(graph, attention, platform).values()
        try:
            stages, lowered, executable = _build(jax, lower(graph, attention, platform), arg_specs)
        except Exception as exc:
            if not cudnn:
                raise
            # cuDNN's fused attention can be missing or refuse a shape at build time: JAX's own attention then.
            notes.append(f"cuDNN fused attention failed, built with JAX's XLA attention: {type(exc).__name__}: "
                         f"{exc}"[:600])
            cudnn, paths = False, lowering_paths(graph, attention, platform, cudnn=False)
            stages, lowered, executable = _build(jax, lower(graph, attention, platform, cudnn=False), arg_specs)

        flags = os.environ.get("XLA_FLAGS", "")
        notes += [f"XLA_FLAGS={flags!r}"] if flags else []
        notes += ["backward: jax.vjp under jax.jit (one XLA executable, forward and backward)"] if grad else []
        hlo = executable.as_text() or ""
        if cudnn and _CUDNN_FMHA not in hlo:
            paths["sdpa"] += f" (requested, but the compiled HLO has no {_CUDNN_FMHA} call)"
        notes += [f"{op}: {words}" for op, words in paths.items()]
        info = CompileInfo(stages_s=stages, cache_hit=(_cache_hits > hits_before) if cache_dir else None,
                           notes=notes, lowering=paths)
        artifacts = {"stablehlo": lowered.as_text(), "hlo_optimized": hlo,
                     "fusion_count": fusion_count(hlo) if hlo else None, "flags": flags.split()}
        return XlaCompiled(executable, info, artifacts)


class XlaSweepServer(SweepServer):
    """One `jax.jit` function over the swept value (a static argument) and the inputs: JAX traces and compiles
    once per distinct (value, input shapes), which is how JAX serves shapes it has not seen. `shapes:
    recompile` calls it at each value; `shapes: bucket` pads the swept dim of every input with zeros to the
    next power of two, calls it at that bucket, and slices the outputs back (only where the graph makes
    padding sound: workloads/padding.py, checked at planning time). Compiles are the jitted function's
    cache size (`_cache_size()`), i.e. the executables JAX holds for it."""

    def __init__(self, spec: Any, device: str, opts: XlaOptions) -> None:
        super().__init__()
        _apply_xla_flags(opts.xla_flags)
        share_gpu_with_torch()
        import jax

        self.spec, self.device, self.bucket = spec, device, opts.shapes == "bucket"
        platform = "cuda" if device.startswith("cuda") else "cpu"
        attention = opts.attention

        def served(value: int, *arrays: Any) -> Any:
            return lower_jax(spec.bound_at(value), attention, platform)(*arrays)

        served.__name__ = f"bakeoff_{spec.graph.name}_sweep_{spec.dim}"
        self.jitted = jax.jit(served, static_argnums=0)
        self._keys: set[tuple] = set()
        self.how = (f"buckets: {spec.dim} padded with zeros to the next power of two, one jit compile per bucket, "
                    "outputs sliced back" if self.bucket else
                    f"one jit trace and compile per shape of {spec.dim} (jax.jit)")
        self.counter = ("the jitted function's _cache_size()" if hasattr(self.jitted, "_cache_size") else
                        "distinct (value, shapes) the jitted function was called with (no _cache_size here)")
        self.notes = [f"attention={attention}"]
        if self.bucket:
            self.axes, self.out_axes = spec.swept_axes(), sliced_axes(spec.graph, spec.dim)

    def at(self, value: int, graph: Graph, specs: Sequence[TensorSpec]) -> Compiled:
        size = bucket_of(value) if self.bucket else value
        self._keys.add(size)
        return XlaSweepCompiled(self, value, size)

    def compiles(self) -> int:
        size = getattr(self.jitted, "_cache_size", None)
        return int(size()) if size is not None else len(self._keys)


def bucket_of(value: int) -> int:
    """The power of two a value is padded to (itself when it is one)."""
    return 1 << (int(value) - 1).bit_length()


class XlaSweepCompiled(XlaCompiled):
    """The sweep's jitted function at one value: padded inputs in, sliced outputs out (bucket), or as is.
    The padding (in `prepare`) and the slicing (in `to_torch`) are outside the timed call."""

    def __init__(self, server: XlaSweepServer, value: int, size: int) -> None:
        super().__init__(lambda *xs: server.jitted(size, *xs), CompileInfo(notes=list(server.notes)), {})
        self.server, self.value, self.size = server, value, size

    def prepare(self, inputs: Sequence[Any]) -> tuple:
        arrays = super().prepare(inputs)
        if not self.server.bucket or self.size == self.value:
            return arrays
        import jax.numpy as jnp

        out = []
        for x, axes in zip(arrays, self.server.axes):
            pad = [(0, self.size - self.value if i in axes else 0) for i in range(x.ndim)]
            out.append(jnp.pad(x, pad) if axes else x)
        return tuple(out)

    def to_torch(self, raw: Any) -> list[Any]:
        outs = super().to_torch(raw)
        if not self.server.bucket or self.size == self.value:
            return outs
        for i, axes in enumerate(self.server.out_axes):
            for axis in axes:
                outs[i] = outs[i].narrow(axis, 0, self.value)
        return [o.contiguous() for o in outs]

    def artifacts(self) -> dict[str, Any] | None:
        return {"graph": self.server.spec.bound_at(self.size).pretty()}
