"""PyTorch Inductor: torch.compile of the same PyTorch lowering eager runs (Triton on GPU, C++ on CPU).

Options (YAML `backends: {inductor: {...}}`): `InductorOptions` below (`bakeoff list backends --options`).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from pydantic import Field, field_validator, model_validator

from bakeoff.workloads.ir import Graph

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec, TorchCompiled
from bakeoff.backends.options import BackendOptions, clip

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

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                options: Mapping[str, Any]) -> Compiled:
        import torch

        from bakeoff.workloads.lower_torch import lower_torch

        opts = self.parse_options(options)
        fn = torch.compile(lower_torch(graph), backend="inductor",
                           mode=None if opts.mode == "default" else opts.mode,
                           dynamic=opts.dynamic, fullgraph=opts.fullgraph, options=opts.options)
        notes = [f"mode={opts.mode}", f"dynamic={opts.dynamic}"]
        compiled = InductorCompiled(fn, device, CompileInfo(notes=notes), {"graph": graph.pretty()})
        compiled.baseline = _process_totals()
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


class InductorCompiled(TorchCompiled):
    """torch.compile compiles lazily, in the first call: its stages and cache verdict are read afterwards, as
    differences from the process's totals when compile() returned (`baseline`)."""

    baseline: tuple[dict[str, float], dict[str, int]] = ({}, {})

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
        return CompileInfo(stages_s=stages, cache_hit=hit, notes=self._info.notes + [
            f"fxgraph_cache hits={hits} misses={misses}"])

    @info.setter
    def info(self, value: CompileInfo) -> None:
        self._info = value

    def artifacts(self) -> dict[str, Any] | None:
        """The graph, and `output_code.py`: the module(s) Inductor generated and loaded in this process (the
        wrapper that calls the kernels, with each Triton or C++ kernel's source inline), as TORCH_LOGS=
        output_code prints them. Read through PyCodeCache, a private API: when it is missing or changed,
        `output_code_error` says so instead."""
        out = dict(self._artifacts or {})
        try:
            from torch._inductor.codecache import PyCodeCache

            # `modules` (torch >= 2.6), else the older `cache` dict of key -> module
            loaded = getattr(PyCodeCache, "modules", None) or list(getattr(PyCodeCache, "cache", {}).values())
            paths = list(dict.fromkeys(m.__file__ for m in loaded if getattr(m, "__file__", None)))
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
