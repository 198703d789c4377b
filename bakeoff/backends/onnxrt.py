"""ONNX Runtime: the graph exported to ONNX (`workloads.lower_onnx`), run by an InferenceSession.

Inputs and outputs are bound in place through IOBinding on the torch tensors' memory (CPU or CUDA), so the
timed `run` copies nothing. Session creation (graph optimizations, kernel selection) is the compile stage.

Options (YAML `backends: {onnxruntime: {...}}`): `OrtOptions` below (`bakeoff list backends --options`):
graph_optimization_level, intra_op_num_threads, use_tf32, optimize, and the export's opset, attention and
artifacts_dir. attention: "contrib" (default: ONNX Runtime's fused attention ops, com.microsoft
MultiHeadAttention or GroupQueryAttention), "native" (the opset-23 Attention op) or "decomposed" (MatMul,
Where, Softmax, MatMul); a form this runtime cannot run for the case falls to the next, and `info.lowering`
says which ran and why (onnxrt_session.py). optimize: "transformers" (default) runs onnxruntime.transformers'
optimizer on the export, "none" leaves it as exported.

On CUDA the CUDAExecutionProvider is required (onnxruntime-gpu) and CPU fallback is disabled, so that a node
without a CUDA kernel fails the case instead of silently running on the host.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from collections import Counter
from typing import Any, Callable, Literal, Sequence

from pydantic import Field

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec
from bakeoff.backends.onnx_export import OnnxExportOptions, dynamic_model  # noqa: F401  (re-exported)
from bakeoff.backends.onnxrt_install import double_install, imported_version
from bakeoff.backends.onnxrt_session import open_session, sweep_models
from bakeoff.backends.sweep_server import PerShapeServer, SweepServer, SweepSpec
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.lower_onnx import input_names, model_summary, onnx_elem_type, output_names
from bakeoff.workloads.onnx_text import node_list

__all__ = ["OnnxExportOptions", "OnnxRuntimeBackend", "OrtCompiled", "OrtOptions", "dynamic_model"]

_INSTALL = "pip install 'bakeoff[onnx]'"


class OrtOptions(OnnxExportOptions):
    graph_optimization_level: Literal["disable", "basic", "extended", "all"] = Field(
        "all", description="ONNX Runtime's graph optimizations")
    intra_op_num_threads: int | None = Field(None, ge=1, le=4096,
                                             description="threads per op; None: ONNX Runtime's choice (one per "
                                                         "physical core)")
    use_tf32: bool = Field(False, description="CUDA provider: float32 MatMul/Gemm/Conv on TF32 tensor cores "
                                              "(faster; 10-bit mantissa products, below float32 accuracy). Off: "
                                              "float32 runs as float32 (the provider's own default is on)")
    attention: Literal["contrib", "native", "decomposed"] = Field(
        "contrib", description="contrib: ONNX Runtime's fused attention ops (com.microsoft.MultiHeadAttention, "
                               "else GroupQueryAttention), else native; native: the opset-23 Attention op, else "
                               "decomposed; decomposed: MatMul, Where, Softmax, MatMul (onnxrt_session.py)")
    optimize: Literal["transformers", "none"] = Field(
        "transformers", description="transformers: onnxruntime.transformers' optimizer (bert fusions) on the "
                                    "export before the session; none: the export as is")

# supports() probes: (graph digest, device, options as JSON) -> None or the reason ONNX Runtime gave.
_PROBES: dict[tuple, str | None] = {}


def _device_id(device: str) -> tuple[str, int]:
    """IOBinding's (device type, device id) for a harness device string."""
    if device.startswith("cuda"):
        import torch

        dev = torch.device(device)
        return "cuda", dev.index if dev.index is not None else torch.cuda.current_device()
    return "cpu", 0


def _providers(device: str, opts: Any = None) -> list:
    """The session's providers: CUDA with its options (TF32 only when `opts.use_tf32`), or the CPU."""
    kind, index = _device_id(device)
    if kind == "cuda":
        import torch

        options = {"device_id": str(index), "use_tf32": "1" if getattr(opts, "use_tf32", False) else "0"}
        # Run on torch's current stream when it is a real stream, so ONNX Runtime's kernels are ordered with
        # torch's work (CUDA EP option user_compute_stream, onnxruntime PR 19229). Torch's default stream has
        # handle 0, which ONNX Runtime treats as "none" and replaces with its own stream; prepare() and sync()
        # synchronize the device, which covers that case.
        stream = torch.cuda.current_stream(index).cuda_stream
        if stream:
            options.update({"has_user_compute_stream": "1", "user_compute_stream": str(stream)})
        return [("CUDAExecutionProvider", options)]
    return ["CPUExecutionProvider"]


def _session_maker(device: str, opts: OrtOptions) -> Callable[[bytes], Any]:
    """A function from a serialized model to its InferenceSession, with the case's options and providers."""
    import onnxruntime as ort

    so = _session_options(device, opts)
    return lambda model_bytes: ort.InferenceSession(model_bytes, so, providers=_providers(device, opts))


def _session_options(device: str, opts: OrtOptions) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[opts.graph_optimization_level]
    if opts.intra_op_num_threads is not None:
        so.intra_op_num_threads = opts.intra_op_num_threads
    if device.startswith("cuda"):
        # Documented session config key: fail rather than place nodes on the CPU provider behind our back.
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return so


class OrtCompiled(Compiled):
    """An InferenceSession plus the names it reads and writes, in graph order."""

    def __init__(self, session: Any, graph: Graph, device: str, info: CompileInfo, model_bytes: bytes,
                 artifacts: dict[str, Any], options: OrtOptions) -> None:
        self.session, self.graph, self.device, self.info = session, graph, device, info
        self.inputs, self.outputs = input_names(graph), output_names(graph)
        self._model_bytes, self._artifacts, self._options = model_bytes, artifacts, options

    def prepare(self, inputs: Sequence[Any]) -> Any:
        """Bind the input tensors and freshly allocated output tensors to an IOBinding (no copies later).

        Outputs start as NaN (allocated here, outside any timed region; the harness prepares afresh before each
        checked run), so an output ONNX Runtime never writes cannot pass the numeric check.
        """
        import torch

        from bakeoff.workloads.lower_torch import TORCH_DTYPES  # imports torch: not at the module's import

        kind, index = _device_id(self.device)
        binding = self.session.io_binding()
        keep = []
        for name, node, x in zip(self.inputs, self.graph.inputs, inputs):
            want = TORCH_DTYPES[node.dtype]
            if x.dtype != want or tuple(x.shape) != tuple(node.shape):
                raise ValueError(f"input {name!r}: expected {node.dtype}{list(node.shape)}, "
                                 f"got {x.dtype}{list(x.shape)}")
            # A raw pointer is bound: memory on another device than the session's would be read as if it
            # were the session's (garbage or a crash), so refuse it here.
            on = (x.device.type, x.device.index if x.device.type == "cuda" else 0)
            if on[0] != kind or (kind == "cuda" and on[1] is not None and on[1] != index):
                raise ValueError(f"input {name!r} is on {x.device}, but the ONNX Runtime session runs on "
                                 f"{kind}:{index}; move it there before prepare()")
            x = x.contiguous()
            keep.append(x)
            binding.bind_input(name, kind, index, onnx_elem_type(node.dtype), list(x.shape), x.data_ptr())
        outs = []
        for name, node in zip(self.outputs, self.graph.output_nodes):
            y = torch.full(tuple(node.shape), float("nan"), dtype=TORCH_DTYPES[node.dtype], device=self.device)
            binding.bind_output(name, kind, index, onnx_elem_type(node.dtype), list(y.shape), y.data_ptr())
            outs.append(y)
        if kind == "cuda":
            torch.cuda.synchronize(index)   # inputs complete before ONNX Runtime reads them
        return binding, keep, outs

    def run(self, prepared: Any) -> Any:
        binding, _, outs = prepared
        self.session.run_with_iobinding(binding)
        return outs

    def to_torch(self, raw: Any) -> list[Any]:
        # Copies, because the next run on the same prepared binding writes the same buffers.
        return [y.clone() for y in raw]

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()

    def artifacts(self) -> dict[str, Any] | None:
        """Model facts, plus the op histogram after ONNX Runtime's own optimizations (a second, untimed session).

        The optimized graph shows what actually ran: fusions, and the Cast nodes ONNX Runtime's CPU provider
        inserts around float16 ops it has no float16 kernel for (those ops then compute in float32).
        """
        out = dict(self._artifacts)
        try:
            import onnx
            import onnxruntime as ort

            with tempfile.TemporaryDirectory() as tmp:
                so = _session_options(self.device, self._options)
                so.log_severity_level = 3   # no warning that the saved optimized model is machine-specific
                so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
                ort.InferenceSession(self._model_bytes, so, providers=_providers(self.device, self._options))
                opt = onnx.load(so.optimized_model_filepath)
            ops = Counter((f"{n.domain}." if n.domain not in ("", "ai.onnx") else "") + n.op_type
                          for n in opt.graph.node)
            out["optimized_nodes.txt"] = node_list(opt)
            out["optimized_op_types"] = dict(sorted(ops.items()))
            out["optimized_nodes"] = len(opt.graph.node)
            out["casts_added_by_ort"] = ops.get("Cast", 0) - out["op_types"].get("Cast", 0)
        except Exception as exc:  # the artifact is optional; say why it is missing
            out["optimized_error"] = f"{type(exc).__name__}: {exc}"[:500]
        return out


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    grad_reason = ("is inference only: ONNX Runtime runs an exported forward graph (its training API, onnxruntime-training, "
                   "is a separate package with its own graph build, not this adapter)")
    Options = OrtOptions

    @classmethod
    def compile_times_on_device(cls, options: Any) -> str | None:
        """The session is built on the host; the CUDA provider's one device search (cuDNN's convolution
        algorithms) has no convolution to search in these workloads."""
        return None

    @classmethod
    def available(cls) -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return f"onnxruntime not installed ({_INSTALL})"
        try:
            import onnx  # noqa: F401
        except ImportError:
            return f"onnx not installed ({_INSTALL})"
        return None

    @classmethod
    def version(cls) -> str | None:
        return imported_version()

    @classmethod
    def install_warning(cls) -> str | None:
        return double_install()

    def supports(self, graph: Graph, device: str, dtype: str, options: OrtOptions | None = None) -> str | None:
        """Device and dtype checks, then a real try: create a session and report a missing kernel.

        ONNX Runtime's CPU provider has no bfloat16 kernels for most ops (Add, MatMul, Exp, ...): session
        creation fails with NOT_IMPLEMENTED, naming the op. That is a skip, not an error. Other failures are
        left for compile() to raise, so a lowering bug is recorded as a failure rather than hidden.
        """
        reason = super().supports(graph, device, dtype, options)
        if reason:
            return reason
        import onnxruntime as ort

        if device.startswith("cuda") and "CUDAExecutionProvider" not in ort.get_available_providers():
            return "onnxruntime has no CUDA provider (pip install onnxruntime-gpu)"
        return self._probe(graph, device, dtype, options or self.Options())

    def _probe(self, graph: Graph, device: str, dtype: str, options: OrtOptions) -> str | None:
        """Runs at planning time (harness.plan), so it never raises: a known "cannot run this" is a reason
        string; any other failure (bad option values included) gives None, so compile() raises it again as
        this case's compile_error. The probe exports and opens the session as compile() will, with the case's
        `opset` and session options."""
        key = (graph.digest(), device, options.model_dump_json())
        if key not in _PROBES:
            try:
                _PROBES[key] = self._try_session(graph, device, dtype, options)
            except Exception:   # not a known "unsupported": left for compile() to raise and record
                _PROBES[key] = None
        return _PROBES[key]

    def _try_session(self, graph: Graph, device: str, dtype: str, opts: OrtOptions) -> str | None:
        import onnxruntime as ort
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail as OrtFail
        from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

        try:
            open_session(graph, device, opts, _session_maker(device, opts))
            return None
        except NotImplementedError as exc:   # an op the ONNX lowering has no rule for
            return f"onnxruntime: {exc}"
        except OrtNotImplemented as exc:
            # "... NOT_IMPLEMENTED : Could not find an implementation for MatMul(13) node with name '...'"
            provider = "CUDA" if device.startswith("cuda") else "CPU"
            found = re.search(r"implementation for (\S+) node", str(exc))
            what = found.group(1) if found else str(exc).split(" : ")[-1].strip()
            return (f"onnxruntime {ort.__version__} {provider} provider has no {dtype} kernel for "
                    f"{what} (NOT_IMPLEMENTED at session creation)")
        except OrtFail as exc:
            # On CUDA with CPU fallback disabled, a node the CUDA provider does not claim fails the session.
            if "fallback to CPU EP has been explicitly disabled" not in str(exc):
                raise   # unexpected: _probe turns it into None and compile() records it
            return (f"onnxruntime {ort.__version__} CUDA provider does not take every node of this "
                    f"graph in {dtype} (CPU fallback is disabled so that nothing runs on the host)")

    def serve_sweep(self, spec: SweepSpec, device: str, opts: OrtOptions) -> SweepServer:
        """One session with the swept dim a dynamic axis where the export allows it (`dynamic_model`), in the
        first attention form that opens, as `open_session` tries them; else one session per shape, with the
        reason."""
        reasons = []
        for label, model, reason, last in sweep_models(spec, opts, device):
            if model is None:
                reasons.append(reason)
                continue
            try:
                return OrtSweepServer(spec, device, opts, model, label)
            except Exception as exc:
                if last:
                    raise
                reasons.append(f"{label}: {type(exc).__name__}: {str(exc)[:200]}")
        return PerShapeServer(self, device, opts, "; ".join(r for r in reasons if r))

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, opts: OrtOptions) -> Compiled:
        model, session, stages, paths, optimize_notes = open_session(graph, device, opts, _session_maker(device, opts))
        model_bytes = model.SerializeToString()

        artifacts = model_summary(model)
        artifacts["nodes.txt"] = node_list(model)
        artifacts["providers"] = session.get_providers()
        artifacts["model.onnx"] = model_bytes   # the harness writes bytes artifacts to its artifacts folder
        if opts.artifacts_dir:
            path = os.path.join(opts.artifacts_dir, f"{graph.name}-{graph.digest()}.onnx")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(model_bytes)
            artifacts["model_path"] = path
        notes = [f"opset={artifacts['opset']}", f"graph_optimization_level={opts.graph_optimization_level}",
                 f"providers={','.join(session.get_providers())}", f"attention={opts.attention}"] + optimize_notes
        if device == "cpu" and any(n.dtype == "float16" for n in graph.nodes):
            notes.append("float16 on the CPU provider: ops without a float16 kernel compute in float32 between "
                         "Casts that ONNX Runtime inserts (artifacts: casts_added_by_ort)")
        if opts.intra_op_num_threads is not None:
            notes.append(f"intra_op_num_threads={opts.intra_op_num_threads}")
        if device.startswith("cuda"):
            notes.append("use_tf32=1: float32 MatMul/Gemm on TF32 tensor cores, below float32 accuracy"
                         if opts.use_tf32 else "use_tf32=0: float32 MatMul/Gemm in float32")
        notes += [f"{op}: {words}" for op, words in paths.items()]
        # Session creation (graph optimizations, kernel selection) is ONNX Runtime's compile: the headline
        # compile time; the ONNX export, the transformers pass and any attention form's session that failed
        # are recorded apart.
        info = CompileInfo(stages_s=stages, notes=notes, compiler_stages=("session",), lowering=paths)
        return OrtCompiled(session, graph, device, info, model_bytes, artifacts, opts)


class OrtSweepServer(SweepServer):
    """One InferenceSession over a model whose swept axes are dynamic (`dynamic_model`), bound per point to
    that point's shapes; compiles are the sessions created (one). Built by `OnnxRuntimeBackend.serve_sweep`,
    which falls back to one session per shape where the export bakes the dim in."""

    def __init__(self, spec: SweepSpec, device: str, opts: OrtOptions, model: Any, attention: str) -> None:
        super().__init__(how=f"one session, {spec.dim} a dynamic axis of the exported model",
                         counter="InferenceSession objects created")
        import onnxruntime as ort

        self.spec, self.device, self.opts = spec, device, opts
        self.model_bytes = model.SerializeToString()
        t0 = time.perf_counter()
        self.session = ort.InferenceSession(self.model_bytes, _session_options(device, opts),
                                            providers=_providers(device, opts))
        self.session_s = time.perf_counter() - t0
        self.notes = [f"attention={attention}", f"providers={','.join(self.session.get_providers())}"]
        self._sessions = 1

    def at(self, value: int, graph: Graph, specs: Sequence[TensorSpec]) -> Compiled:
        info = CompileInfo(stages_s={"session": self.session_s}, notes=list(self.notes))
        return OrtCompiled(self.session, graph, self.device, info, self.model_bytes, {}, self.opts)

    def compiles(self) -> int:
        return self._sessions
