"""IREE: the graph's StableHLO (from the JAX lowering) compiled by iree-compile and run by iree.runtime.

CPU: llvm-cpu code for the host CPU on the `local-task` driver. CUDA: code for the GPU's compute capability
if the installed compiler knows it, else the highest target it does know (recorded in `CompileInfo.notes`),
on the `cuda` driver. IREE's Python runtime has no DLPack import, so `prepare` uploads inputs to device
buffers once (untimed) and `run` invokes the module on them.

Options (YAML `backends: {iree: {...}}`): `IreeOptions` below (`preset`: "tuned", the default, passes the
optimization flags IREE's documentation recommends, "plain" none (iree_presets.py); `extra_flags`: appended
to iree-compile's after the preset's; `attention`: "auto" (default), "fused" or "decomposed", iree_attention.py).
IREE's input is StableHLO from the JAX lowering, which has no attention op (JAX's fused attention is a cuDNN
custom call that IREE cannot lower): JAX's decomposed attention comes as its own function, whose body
iree_attention.py replaces by IREE's attention op (`iree_linalg_ext.attention`, the op torch-mlir's SDPA
reaches) where the option asks for it; the record's `lowering` names the form that ran and why.
IREE has no compile cache: `cache_env` stays empty.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import Field, field_validator

from bakeoff.workloads.ir import Graph

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec, user_cache_dir
from bakeoff.backends.iree_attention import DECOMPOSED, AttentionOption, route as attention_route
from bakeoff.backends.iree_presets import preset_flags, preset_note
from bakeoff.backends.options import BackendOptions, clip
from bakeoff.backends.sweep_server import PerShapeServer, SweepServer
from bakeoff.workloads.lower_jax import lowering_paths, stablehlo_text


class IreeOptions(BackendOptions):
    preset: Literal["tuned", "plain"] = Field(
        "tuned", description="tuned: --iree-opt-level=O3 and aggressive dispatch fusion (IREE's documented "
                             "speed settings); plain: iree-compile's defaults (O0) (iree_presets.py)")
    extra_flags: list[str] = Field(default_factory=list, max_length=256,
                                   description="flags appended to iree-compile's, after the preset's, e.g. "
                                               "--iree-codegen-llvmgpu-use-vector-distribution=true")

    @field_validator("extra_flags")
    @classmethod
    def _flags(cls, flags: list[str]) -> list[str]:
        # The module comes from bakeoff: a word that is not a flag would be read as a second input file.
        for flag in flags:
            if not flag.startswith("-"):
                raise ValueError(f"each entry is one iree-compile flag (--name or --name=value), not {clip(flag)!r}")
        return flags

    attention: AttentionOption = Field(
        "auto", description="fused: each attention as IREE's iree_linalg_ext.attention (one flash-attention "
                            "dispatch); decomposed: matmul, mask, softmax, matmul as JAX writes it; auto: the route measured "
                            "faster on the device, decomposed today (iree_attention.py)")

    @field_validator("attention", mode="before")
    @classmethod
    def _attention(cls, value: Any) -> Any:
        if value not in ("auto", "fused", "decomposed"):
            raise ValueError(f"attention={clip(str(value))!r} is not an IREE route: use auto, fused (IREE's "
                             "iree_linalg_ext.attention) or decomposed; JAX's native attention is a cuDNN custom "
                             "call, which IREE cannot lower from StableHLO")
        return value

# Synchronous exports: each call waits for its device work before returning (see IreeCompiled.sync).
_COMMON_FLAGS = ["--iree-execution-model=async-internal"]
_CPU_FLAGS = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
              "--iree-llvmcpu-target-cpu=host"]


# CUDA targets, newest first, that iree-compile may know ("a" variants left out: they run on one arch only).
_SM_TARGETS = ("sm_120", "sm_100", "sm_90", "sm_89", "sm_87", "sm_86", "sm_80", "sm_75", "sm_70", "sm_61",
               "sm_60")
_PROBE_MODULE = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
_known_targets: dict[str, bool] = {}


def _compiler_version() -> str:
    try:
        return importlib.metadata.version("iree-base-compiler")
    except importlib.metadata.PackageNotFoundError:  # a source build or a renamed nightly wheel
        from iree.compiler.version import VERSION

        return VERSION


def _probe_cache_file() -> Path:
    return user_cache_dir() / "iree_cuda_targets.json"


def _accepts(target: str) -> bool:
    """Whether this iree-compile compiles a tiny module for CUDA `target` (no GPU needed to compile).

    Answers are kept per compiler version in memory and in ~/.cache/bakeoff, so that a worker process per
    case does not pay ~0.5 s per probe inside its measured compile time.
    """
    key = f"{_compiler_version()}:{target}"
    if key not in _known_targets:
        path = _probe_cache_file()
        try:
            _known_targets.update(json.loads(path.read_text()))
        except (OSError, ValueError):
            pass
    if key not in _known_targets:
        import iree.compiler as ireec

        try:
            ireec.compile_str(_PROBE_MODULE, input_type="stablehlo",
                              extra_args=["--iree-hal-target-device=cuda", f"--iree-cuda-target={target}"])
            _known_targets[key] = True
        except ireec.CompilerToolError:
            _known_targets[key] = False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(_known_targets))
            tmp.replace(path)  # atomic: concurrent workers never read half a file
        except OSError:
            pass  # an unwritable cache only costs time
    return _known_targets[key]


def cuda_target(wanted: str) -> tuple[str, str | None]:
    """The CUDA target to compile for a GPU of target `wanted` (e.g. "sm_90"), and a note if downgraded.

    `wanted` itself if iree-compile accepts it, else the highest older target it accepts: PTX for an older
    target runs on newer GPUs through the driver's JIT, without the newer architecture's instructions.
    """
    number = int(wanted.removeprefix("sm_"))
    candidates = [wanted] + [t for t in _SM_TARGETS if int(t.removeprefix("sm_")) < number]
    for target in candidates:
        if _accepts(target):
            if target == wanted:
                return target, None
            return target, (f"compiled for {target}: iree-compile {_compiler_version()} knows no {wanted}; "
                            "runs through the driver's PTX JIT")
    raise RuntimeError(f"iree-compile {_compiler_version()} accepts none of the CUDA targets {candidates}")


def _cuda_index(device: str) -> int:
    return int(device.partition(":")[2] or 0)


def _host_array(t: Any) -> Any:
    """A C-contiguous NumPy copy of torch tensor `t`; bfloat16 as ml_dtypes.bfloat16 (same bits)."""
    import ml_dtypes
    import numpy as np
    import torch

    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return np.ascontiguousarray(t.numpy())


def _to_tensor(a: Any, device: str) -> Any:
    """Torch tensor on `device` from a NumPy array (copied: the source may be mapped device memory)."""
    import ml_dtypes
    import numpy as np
    import torch

    a = np.array(a, copy=True, order="C")
    if a.dtype == np.dtype(ml_dtypes.bfloat16):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(device)
    return torch.from_numpy(a).to(device)


class IreeCompiled(Compiled):
    """A loaded IREE module (its `main`) on one HAL device."""

    def __init__(self, fn: Any, hal_device: Any, device: str, info: CompileInfo,
                 artifacts: dict[str, Any]) -> None:
        self.fn = fn
        self.hal_device = hal_device
        self.device = device
        self.info = info
        self._artifacts = artifacts

    def prepare(self, inputs: Sequence[Any]) -> tuple:
        import iree.runtime as ireert

        # Host copy, then one upload into device-local buffers that every run() reuses.
        return tuple(ireert.asdevicearray(self.hal_device, _host_array(t)) for t in inputs)

    def run(self, prepared: Any) -> tuple:
        out = self.fn(*prepared)
        return out if isinstance(out, tuple) else (out,)

    def sync(self) -> None:
        # Nothing to wait for: modules are compiled with --iree-execution-model=async-internal, whose
        # exported functions wait on their own fences, so the call in run() returns only once the device
        # work (CPU task pool or CUDA stream) has finished and the results are ready.
        return None

    def to_torch(self, raw: Any) -> list[Any]:
        return [_to_tensor(x.to_host(), self.device) for x in raw]

    def artifacts(self) -> dict[str, Any] | None:
        return self._artifacts


class IreeBackend(Backend):
    name = "iree"
    Options = IreeOptions
    grad = True  # from the StableHLO of JAX's jitted jax.vjp step, the forward's route

    @classmethod
    def compile_times_on_device(cls, options: IreeOptions) -> str | None:
        return None  # iree-compile is a host process; the device sees the first run only

    @classmethod
    def available(cls) -> str | None:
        if importlib.util.find_spec("iree") is None or importlib.util.find_spec("iree.compiler") is None:
            return "iree not installed (pip install 'bakeoff[iree]')"
        if importlib.util.find_spec("iree.runtime") is None:
            return "iree runtime not installed (pip install iree-base-runtime)"
        if importlib.util.find_spec("jax") is None:
            return "jax not installed: IREE's input is StableHLO lowered by JAX (pip install 'bakeoff[xla]')"
        return None

    @classmethod
    def version(cls) -> str | None:
        try:
            return (f"iree-base-compiler {importlib.metadata.version('iree-base-compiler')}, "
                    f"iree-base-runtime {importlib.metadata.version('iree-base-runtime')}")
        except importlib.metadata.PackageNotFoundError:
            return None

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: IreeOptions) -> Compiled:
        return self._compile(graph, device, options, grad=False)

    def serve_sweep(self, spec: Any, device: str, options: IreeOptions) -> Any:
        """One module with the swept dim dynamic (`IreeSweepServer`); where the symbolic export or iree-compile
        refuses it, one compile per shape with that reason."""
        from bakeoff.workloads.lower_torch_dynamic import LowerError

        import iree.compiler as ireec

        try:
            return IreeSweepServer(spec, device, options)
        except LowerError as exc:
            reason = f"no StableHLO with {spec.dim} dynamic: {exc}"
        except ireec.CompilerToolError as exc:
            found = re.search(r"error: ([^\n]*)", str(exc))
            words = (found.group(1) if found else str(exc)).split(" loc(")[0]   # the op, without its source trail
            reason = f"iree-compile refused the module with {spec.dim} dynamic: {words[:300]}"
        return PerShapeServer(self, device, options, reason)

    def compile_grad(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                     options: IreeOptions) -> Compiled:
        """The StableHLO of JAX's jitted jax.vjp step (lower_jax.stablehlo_text(grad=True)), through iree-compile
        as the forward's: one module computing outputs and gradients."""
        return self._compile(graph, device, options, grad=True)

    def _compile(self, graph: Graph, device: str, opts: IreeOptions, grad: bool) -> Compiled:
        import iree.compiler  # noqa: F401
        import iree.runtime  # noqa: F401
        import jax  # noqa: F401  (imported before the clock starts, as in the xla backend's stages)

        stages: dict[str, float] = {}
        t0 = time.perf_counter()
        source = stablehlo_text(graph, "cpu" if device == "cpu" else "cuda", grad=grad)
        stages["stablehlo"] = time.perf_counter() - t0
        paths = lowering_paths(graph, "decomposed", "cpu" if device == "cpu" else "cuda")
        source, paths = attention_route(source, graph, opts.attention, grad, paths)
        notes = ["backward: StableHLO of jax.vjp under jax.jit, compiled by iree-compile"] if grad else []
        return compile_module(source, device, opts, stages, notes, paths)


def compile_module(source: str, device: str, opts: IreeOptions, stages: dict[str, float], notes: list[str],
                   paths: dict[str, str]) -> "IreeCompiled":
    """StableHLO text `source` through iree-compile for `device`, loaded on its HAL device; `stages`, `notes` and
    the lowering `paths` so far are the caller's (the export's stage, its notes)."""
    import iree.compiler as ireec
    import iree.runtime as ireert

    stages, paths, extra_notes, notes = dict(stages), dict(paths), list(notes), []
    flags, driver_uri, target = _target(device, stages, notes)
    flags += _COMMON_FLAGS + preset_flags(opts.preset) + list(opts.extra_flags)
    vmfb, stats, dispatches = _iree_compile(ireec, source, flags, stages)

    t0 = time.perf_counter()
    hal_device = ireert.get_device(driver_uri)
    config = ireert.Config(device=hal_device)
    context = ireert.SystemContext(config=config)
    module = ireert.VmModule.copy_buffer(config.vm_instance, vmfb)
    context.add_vm_module(module)
    fn = context.modules[module.name]["main"]
    stages["load"] = time.perf_counter() - t0

    aggregate = stats.get("stream-aggregate", {})
    artifacts = {
        "vmfb_bytes": len(vmfb),
        "dispatch_count": aggregate.get("execution", {}).get("dispatch-count"),
        "executable_count": aggregate.get("executable", {}).get("executable-count"),
        "flags": flags,
        "target": target,
        "stablehlo": source,
        "dispatches.mlir": dispatches or None,
    }
    notes += [f"target={target}", preset_note(opts.preset)] + (
        [f"extra_flags={' '.join(opts.extra_flags)}"] if opts.extra_flags else [])
    notes += extra_notes
    notes += [f"{op}: {words}" for op, words in paths.items()]
    # The headline compile time is iree-compile's; the StableHLO export, the target probe and the module
    # load are recorded apart in stages_s.
    info = CompileInfo(stages_s=stages, notes=notes, compiler_stages=("compile",), lowering=paths)
    return IreeCompiled(fn, hal_device, device, info, artifacts)


def _target(device: str, stages: dict[str, float], notes: list[str]) -> tuple[list[str], str, str]:
    """(iree-compile's target flags, the HAL driver URI, the target in words) for `device`; a CUDA target
    probe's time goes into `stages`, its note into `notes`."""
    if device == "cpu":
        return list(_CPU_FLAGS), "local-task", "llvm-cpu host"
    if not device.startswith("cuda"):
        raise ValueError(f"iree: unknown device {device!r}")
    import torch

    major, minor = torch.cuda.get_device_capability(_cuda_index(device))
    t0 = time.perf_counter()
    target, note = cuda_target(f"sm_{major}{minor}")
    stages["target_probe"] = time.perf_counter() - t0
    if note:
        notes.append(note)
    # the driver's CUDA ordinal, as torch numbers visible GPUs
    return ["--iree-hal-target-device=cuda", f"--iree-cuda-target={target}"], f"cuda://{_cuda_index(device)}", target


def _iree_compile(ireec: Any, source: str, flags: list[str], stages: dict[str, float]) -> tuple[bytes, dict, str]:
    """iree-compile of StableHLO `source` (its time as `stages["compile"]`): the vmfb, IREE's scheduling
    statistics and the dispatches' sources."""
    with tempfile.TemporaryDirectory(prefix="bakeoff-iree-") as tmp:
        stats_path = Path(tmp) / "stats.json"
        # IREE's own scheduling statistics count the dispatches the program launches per call.
        # The dispatches' sources (one executable each, with locations back into the StableHLO) are written
        # too, for the report: a few small files, inside the timed compile as the statistics are.
        stats_flags = ["--iree-scheduling-dump-statistics-format=json",
                       f"--iree-scheduling-dump-statistics-file={stats_path}",
                       f"--iree-hal-dump-executable-sources-to={Path(tmp) / 'sources'}"]
        t0 = time.perf_counter()
        vmfb = ireec.compile_str(source, input_type="stablehlo", extra_args=flags + stats_flags)
        stages["compile"] = time.perf_counter() - t0
        stats = json.loads(stats_path.read_text())
        dispatches = "".join(f"// ---- {p.name}\n{p.read_text(errors='replace')}\n"
                             for p in sorted((Path(tmp) / "sources").glob("*.mlir")))
    return vmfb, stats, dispatches


class IreeSweepServer(SweepServer):
    """One vmfb for every value of the swept dim: the StableHLO exported by `jax.export` with the dim symbolic
    (workloads/lower_jax_dynamic.py: `tensor<?x...>` arguments), compiled once by iree-compile and called at
    each shape (IREE's runtime reads the shapes from the buffers it is given). Compiled when the server is
    built, so the compile is in `sweep_setup_s` and every point reuses it. IREE keeps no count of its own:
    compiles are the vmfbs this server had iree-compile produce (one)."""

    def __init__(self, spec: Any, device: str, opts: IreeOptions) -> None:
        super().__init__(how=f"one module, {spec.dim} a dynamic (?) dim of the StableHLO (jax.export symbolic "
                             "shapes), compiled once by iree-compile",
                         counter="vmfb modules this adapter compiled with iree-compile")
        from bakeoff.workloads.lower_jax_dynamic import symbolic_stablehlo

        platform = "cpu" if device == "cpu" else "cuda"
        t0 = time.perf_counter()
        source = symbolic_stablehlo(spec.graph, spec.dim, spec.base, spec.dtype, platform)
        stages = {"stablehlo": time.perf_counter() - t0}
        paths = lowering_paths(spec.bound_at(max(spec.values)), "decomposed", platform)
        if "sdpa" in paths:
            paths["sdpa"] = f"{DECOMPOSED}: a module with a dynamic dim keeps IREE's attention decomposed"
        self.compiled = compile_module(source, device, opts, stages, [f"{spec.dim} dynamic in one module"], paths)
        self._vmfbs = 1
        self.notes = list(self.compiled.info.notes)

    def at(self, value: int, graph: Graph, specs: Sequence[TensorSpec]) -> Compiled:
        return self.compiled

    def compiles(self) -> int:
        return self._vmfbs
