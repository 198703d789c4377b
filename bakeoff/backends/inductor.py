"""PyTorch Inductor: torch.compile of the same PyTorch lowering eager runs (Triton on GPU, C++ on CPU).

Options (YAML `backends: {inductor: {...}}`): `InductorOptions` below (`bakeoff list backends --options`).
"""
from __future__ import annotations

from typing import Any, Sequence

from pydantic import Field, field_validator, model_validator

from bakeoff.backends.torch_step import torch_step
from bakeoff.workloads.ir import Graph

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec, TorchCompiled
from bakeoff.backends.inductor_cpu import answer_extension_checks, cpu_startup_env, share_headers, startup_notes
from bakeoff.backends.options import BackendOptions, clip
from bakeoff.backends.sweep_server import SweepServer

# Modes every supported torch has; another name is checked against the installed torch's list.
_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


class InductorOptions(BackendOptions):
    mode: str = Field("default", description="torch.compile mode: default, reduce-overhead, max-autotune, "
                                             "max-autotune-no-cudagraphs (or another the installed torch lists)")
    dynamic: bool = Field(False, description="compile for dynamic shapes (torch.compile's dynamic)")
    fullgraph: bool = Field(True, description="fail rather than fall back to eager on a graph break")
    options: dict[str, Any] | None = Field(None, description="torch.compile options: Inductor config keys "
                                                             "(e.g. max_autotune: true); not with a mode")

    @field_validator("mode")
    @classmethod
    def _mode(cls, mode: str) -> str:
        if mode in _MODES:
            return mode
        from torch._inductor import list_mode_options

        known = list(list_mode_options())
        if mode not in known:
            raise ValueError(f"unknown mode {clip(mode)!r}; torch {_torch_version()} has {', '.join(known)}")
        return mode

    @field_validator("options")
    @classmethod
    def _config_keys(cls, options: dict[str, Any] | None) -> dict[str, Any] | None:
        """The check torch.compile makes when it applies `options`, made at load time instead."""
        if not options:
            return options
        import typing

        from torch._inductor import config

        current = config.get_config_copy()
        for key, value in options.items():
            attr = key.replace("-", "_")
            if attr not in current:
                raise ValueError(f"{clip(key)!r} is not an Inductor config key of torch {_torch_version()} "
                                 f"(torch._inductor.config)")
            kind = config.get_type(attr)
            if typing.get_origin(kind) is None and isinstance(kind, type) and not isinstance(value, kind):
                raise ValueError(f"{key} must be {kind.__name__}, got {type(value).__name__}")
        return options

    @model_validator(mode="after")
    def _mode_or_options(self) -> "InductorOptions":
        if self.options and self.mode != "default":
            raise ValueError("give mode or options, not both (torch.compile refuses both); a mode's settings "
                             "can be written as options, e.g. max_autotune: true")
        return self


def _torch_version() -> str:
    import torch

    return torch.__version__


class InductorBackend(Backend):
    name = "inductor"
    cache_env = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    graph_capturable = True
    timed_with_events = True
    Options = InductorOptions
    grad = True
    grad_graph_capturable = True
    warmup_in_case_reason = ("Inductor's compile worker pool starts with the warm-up and keeps the environment "
                             "it started with: the case's Triton kernels would be compiled into the warm-up's "
                             "TRITON_CACHE_DIR, not the case's own cache folder")

    # Inductor config keys that make a compile time candidates on the device.
    _DEVICE_TUNING_KEYS = ("max_autotune", "max_autotune_gemm", "max_autotune_pointwise", "coordinate_descent_tuning")

    @classmethod
    def compile_times_on_device(cls, options: InductorOptions) -> str | None:
        """max-autotune (a mode or its config keys) and coordinate-descent tuning time candidate kernels on the
        device. Without them a compile is host work (FX, codegen, Triton's compile) plus the first run, where a
        reduction's few configs are chosen by timing them once: benchmarks/gate_disturbance.py (H200,
        2026-12-01, five processes compiling and running torch.compile graphs with reductions) moved other
        cases' CUPTI spans and CUDA-event medians by at most 0.6%."""
        if "autotune" in options.mode:
            return f"mode {options.mode} times candidate kernels on the device"
        tuned = [k for k in cls._DEVICE_TUNING_KEYS if (options.options or {}).get(k)]
        return f"options {', '.join(tuned)} time candidates on the device" if tuned else None

    @classmethod
    def worker_env(cls, device: str) -> dict[str, str]:
        """On the CPU, what the run established once for Inductor's start-up (inductor_cpu.py)."""
        if device != "cpu":
            return {}
        return cpu_startup_env()

    @classmethod
    def version(cls) -> str | None:
        import torch

        return torch.__version__

    @classmethod
    def available(cls) -> str | None:
        import torch

        if not hasattr(torch, "compile"):
            return "torch.compile missing (torch >= 2.0 needed)"
        return None

    def sweep_refusal(self, spec: Any, options: InductorOptions | None = None) -> str | None:
        from bakeoff.workloads.lower_torch_dynamic import LowerError, lower_torch_dynamic

        try:
            lower_torch_dynamic(spec.graph, spec.dim, _others(spec), spec.dtype)
        except LowerError as exc:
            return f"inductor cannot serve a sweep of {spec.dim}: {exc}"
        return None

    def serve_sweep(self, spec: Any, device: str, options: InductorOptions) -> SweepServer:
        """InductorSweepServer: one module, Dynamo decides the recompiles (`dynamic` chooses)."""
        return InductorSweepServer(spec, device, options)

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: InductorOptions) -> Compiled:
        import torch

        from bakeoff.workloads.lower_torch import lower_torch

        if device == "cpu":
            share_headers()
            answer_extension_checks()
        fn = torch.compile(lower_torch(graph), backend="inductor",
                           mode=None if options.mode == "default" else options.mode,
                           dynamic=options.dynamic, fullgraph=options.fullgraph, options=options.options)
        notes = [f"mode={options.mode}", f"dynamic={options.dynamic}"]
        compiled = InductorCompiled(fn, device, CompileInfo(notes=notes), {"graph": graph.pretty()})
        compiled.baseline = _process_totals()
        try:
            compiled.code_before = frozenset(_loaded_output_code())
        except Exception:  # noqa: BLE001  (private API changed: artifacts() says so)
            pass
        return compiled

    def compile_grad(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                     options: InductorOptions) -> Compiled:
        """torch.compile of the forward module, whose backward AOTAutograd traces jointly and Inductor compiles
        (lazily, in the first step's backward); the step calls torch.autograd.grad on its outputs, which runs
        the compiled backward. The first step checks that it did: the outputs' grad_fn must be AOTAutograd's
        CompiledFunctionBackward (else the step fails), and `info` counts Inductor's graphs (forward + backward)."""
        compiled = self.compile(graph, specs, device, options)
        seen: dict[str, str] = {}

        def check_backward(outs: Sequence[Any]) -> None:
            names = {type(o.grad_fn).__name__ if o.grad_fn is not None else "None" for o in outs}
            seen["grad_fn"] = ", ".join(sorted(names))
            if any("CompiledFunction" not in name for name in names):
                raise RuntimeError(f"inductor: the backward is not AOTAutograd's compiled backward (outputs' grad_fn: "
                                   f"{seen['grad_fn']})")

        compiled.fn = torch_step(compiled.fn, graph, on_first=check_backward)
        compiled.grad_fn_seen = seen
        return compiled


def _process_totals() -> tuple[dict[str, float], dict[str, int]]:
    """torch's cumulative compile-time totals and Inductor's counters in this process so far: a compile's own
    figures are the differences from these (an earlier compile in the process, e.g. the worker's warm-up
    graph, must not count)."""
    from torch._dynamo.utils import counters

    try:
        from torch._dynamo.utils import calculate_time_spent

        spent = dict(calculate_time_spent())
    except Exception:  # private API: absent or changed in other torch versions
        spent = {}
    return spent, dict(counters["inductor"])


def _loaded_output_code() -> list[str]:
    """The files of the output-code modules Inductor has loaded in this process (PyCodeCache, a private API:
    `modules` on torch >= 2.6, else the older `cache` dict of key -> module)."""
    from torch._inductor.codecache import PyCodeCache

    loaded = getattr(PyCodeCache, "modules", None) or list(getattr(PyCodeCache, "cache", {}).values())
    return list(dict.fromkeys(m.__file__ for m in loaded if getattr(m, "__file__", None)))


class InductorCompiled(TorchCompiled):
    """torch.compile compiles lazily, in the first call: its stages and cache verdict are read afterwards, as
    differences from the process's totals when compile() returned (`baseline`)."""

    baseline: tuple[dict[str, float], dict[str, int]] = ({}, {})
    code_before: frozenset[str] = frozenset()  # output code loaded before compile(): the worker's warm-up graph's
    grad_fn_seen: dict[str, str] | None = None  # a training step's: what its first step's outputs came from

    @property
    def info(self) -> CompileInfo:
        spent_now, counts_now = _process_totals()
        spent0, counts0 = self.baseline
        spent = {k: v - spent0.get(k, 0.0) for k, v in spent_now.items()}
        stages: dict[str, float] = {}
        if spent:
            # dynamo = tracing and guards (frame compile minus backend); inductor = lowering, codegen, C++/Triton
            # compile; code_gen and async_compile.wait are parts of inductor, kept apart where present.
            if "entire_frame_compile" in spent:
                stages["dynamo"] = spent["entire_frame_compile"] - spent.get("backend_compile", 0.0)
            for key in ("backend_compile", "inductor_compile", "code_gen", "async_compile.wait"):
                if key in spent:
                    stages[key] = spent[key]
        hits = counts_now.get("fxgraph_cache_hit", 0) - counts0.get("fxgraph_cache_hit", 0)
        misses = counts_now.get("fxgraph_cache_miss", 0) - counts0.get("fxgraph_cache_miss", 0)
        hit = None if hits + misses == 0 else (hits > 0 and misses == 0)
        notes = self._info.notes + [f"fxgraph_cache hits={hits} misses={misses}"]
        if self.device == "cpu":
            notes += startup_notes()
        if self.grad_fn_seen is not None:  # a training step: forward and backward each one Inductor graph
            notes.append(f"backward: AOTAutograd -> Inductor (outputs' grad_fn {self.grad_fn_seen.get('grad_fn', 'not seen yet')}; "
                         f"Inductor graphs compiled or loaded: {hits + misses}, forward + backward)")
        return CompileInfo(stages_s=stages, cache_hit=hit, notes=notes)

    @info.setter
    def info(self, value: CompileInfo) -> None:
        self._info = value

    def artifacts(self) -> dict[str, Any] | None:
        """The graph, and `output_code.py`: the module(s) Inductor generated and loaded for this graph (the
        wrapper that calls the kernels, with each Triton or C++ kernel's source inline), as TORCH_LOGS=
        output_code prints them. Read through PyCodeCache, a private API: when it is missing or changed,
        `output_code_error` says so instead."""
        out = dict(self._artifacts or {})
        if self.grad_fn_seen is not None:  # a training step: the evidence that its backward was compiled
            counts_now, counts0 = _process_totals()[1], self.baseline[1]
            out["inductor_graphs"] = sum(counts_now.get(k, 0) - counts0.get(k, 0)
                                         for k in ("fxgraph_cache_hit", "fxgraph_cache_miss"))
            out["backward_grad_fn"] = self.grad_fn_seen.get("grad_fn")
        try:
            paths = [p for p in _loaded_output_code() if p not in self.code_before]  # this graph's, not the warm-up's
            texts = [open(p, encoding="utf-8", errors="replace").read() for p in paths]
        except Exception as exc:  # noqa: BLE001  (private API: a missing artifact, not a failed case)
            out["output_code_error"] = f"{type(exc).__name__}: {exc}"[:500]
            return out
        if len(texts) == 1:
            out["output_code.py"] = texts[0]
        elif texts:  # several graphs (a graph break): each module under its path
            out["output_code.py"] = "".join(f"# ---- output code {i}: {p}\n{t}\n" for i, (p, t)
                                            in enumerate(zip(paths, texts)))
        else:
            out["output_code_error"] = "no output code module was loaded in this process"
        return out


def _others(spec: Any) -> dict[str, int]:
    return {k: v for k, v in spec.base.items() if k != spec.dim}


def _raise_recompile_limit(distinct: int) -> None:
    """Let Dynamo compile once per distinct shape of a sweep, and fail rather than fall back to eager once its
    recompile limit is hit (that fallback would time eager under Inductor's name). Names differ by torch
    version (recompile_limit, formerly cache_size_limit); unknown ones are skipped."""
    import torch._dynamo.config as dc

    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        try:
            setattr(dc, name, max(int(getattr(dc, name)), distinct + 1))
        except (AttributeError, TypeError):
            continue
    for name in ("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit"):
        try:
            setattr(dc, name, True)
        except AttributeError:
            continue


def _graphs_compiled() -> int:
    """Dynamo's count of graphs it captured and handed to the backend in this process (one per compile and
    recompile of a frame)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


class InductorSweepServer(SweepServer):
    """One torch.compile'd module over the graph lowered with the swept dim read from the inputs' sizes
    (workloads/lower_torch_dynamic.py), so that a recompile is Dynamo's own decision: `dynamic: true`
    compiles with the dim symbolic (and `torch._dynamo.mark_dynamic` on the swept axis of every input) and
    serves every value from one graph; `dynamic: false` recompiles at each new shape. Compiles are Dynamo's
    count of graphs captured (`counters["stats"]["unique_graphs"]`) since the server started; graph breaks are
    `counters["graph_break"]`, kept in the notes."""

    def __init__(self, spec: Any, device: str, opts: InductorOptions) -> None:
        import torch

        from bakeoff.workloads.lower_torch_dynamic import lower_torch_dynamic

        self.spec, self.device, self.dynamic = spec, device, opts.dynamic
        _raise_recompile_limit(spec.distinct())
        super().__init__()
        module = lower_torch_dynamic(spec.graph, spec.dim, _others(spec), spec.dtype)
        self.fn = torch.compile(module, backend="inductor", mode=None if opts.mode == "default" else opts.mode,
                                dynamic=opts.dynamic, fullgraph=opts.fullgraph, options=opts.options)
        self.axes = spec.swept_axes()
        self.how = ("one compile with the swept dim symbolic: torch.compile(dynamic=True), mark_dynamic on "
                    f"{spec.dim}" if opts.dynamic else "static: torch.compile(dynamic=False), a recompile at "
                                                       "each new shape")
        self.counter = 'torch._dynamo.utils.counters["stats"]["unique_graphs"]'
        self.notes = [f"mode={opts.mode}", f"dynamic={opts.dynamic}"]
        self._start = _graphs_compiled()
        self._module = module
        self._compiled: InductorSweepCompiled | None = None

    def at(self, value: int, graph: Graph, specs: Sequence[TensorSpec]) -> Compiled:
        if self._compiled is None:
            self._compiled = InductorSweepCompiled(self, self.device,
                                                   CompileInfo(notes=list(self.notes)),
                                                   {"graph": self.spec.graph.pretty(), "torch_code": self._module.code})
            self._compiled.baseline = _process_totals()
        return self._compiled

    def mark(self, inputs: Sequence[Any]) -> None:
        if not self.dynamic:
            return
        import torch

        for x, axes in zip(inputs, self.axes):
            for axis in axes:
                torch._dynamo.mark_dynamic(x, axis)

    def compiles(self) -> int:
        return _graphs_compiled() - self._start

    def graph_breaks(self) -> int:
        from torch._dynamo.utils import counters

        return sum(counters["graph_break"].values())


class InductorSweepCompiled(InductorCompiled):
    """The sweep's one compiled module; `prepare` marks the swept axes dynamic (dynamic: true)."""

    def __init__(self, server: InductorSweepServer, device: str, info: CompileInfo, artifacts: dict) -> None:
        super().__init__(server.fn, device, info, artifacts)
        self.server = server

    def prepare(self, inputs: Sequence[Any]) -> Any:
        self.server.mark(inputs)
        return tuple(inputs)

