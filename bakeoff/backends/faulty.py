"""A test-only backend that fails on purpose, driven by its `mode` option. Hidden from `list backends`.

Modes: none (behaves like eager), abort (os.abort in run), segfault (a null read through ctypes), hang
(sleeps forever in run), compile_error, run_error, nan (outputs NaN), wrong_shape (drops the last row),
unwritten (returns torch.empty: never written), perturb (adds relative noise of `scale`), host_oom
(reserves 256 MiB blocks, never written, until the host memory cap stops it: memory_limit_gb caps the
address space, so writing them would only add seconds), warm_oom (host_oom in a warm process only: the cold
compile and its figures are fine), cuda_oom (asks the GPU for more than it has), bad_info (runs like eager
but puts an exception object, not its text, in its compile notes).
Wrong answers a verdict must catch: nonfinite_zero (0 where the output is +-inf or NaN: a causal mask
written as 0), zeros (every output 0), spike (the middle element set to `value`, default 5.0), wrong_after
(correct for the first `calls` calls, default 4, then zeros: an output that goes stale with reuse),
stale_cache (zeros from an executable "loaded" from its cache folder: what a warm process gets).
Training steps (`grad: true`): every mode applies to the step's outputs and gradients alike, except
wrong_grad, which perturbs one gradient only (that of the input `grad_input`, default the last one) by
relative noise of `scale`, leaving the outputs and the other gradients right (on a forward case it is none).
"""
from __future__ import annotations

import ctypes
import os
import time
from typing import Any, Literal, Sequence

from pydantic import Field

from bakeoff.backends.torch_step import torch_step
from bakeoff.workloads.grad import grad_inputs
from bakeoff.workloads.ir import Graph

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec, TorchCompiled
from bakeoff.backends.options import BackendOptions

Mode = Literal["none", "abort", "segfault", "hang", "compile_error", "run_error", "nan", "wrong_shape",
               "unwritten", "perturb", "host_oom", "warm_oom", "cuda_oom", "nonfinite_zero", "zeros", "spike", "wrong_after",
               "stale_cache", "wrong_grad", "bad_info"]
CACHE_ENV = "BAKEOFF_FAULTY_CACHE_DIR"


class FaultyOptions(BackendOptions):
    mode: Mode = Field("none", description="the fault to inject (none behaves like eager)")
    scale: float = Field(1e-2, ge=0, le=1e6, description="perturb: noise relative to the outputs' mean magnitude")
    value: float = Field(5.0, description="spike: the value set in the middle element of each output")
    calls: int = Field(4, ge=0, description="wrong_after: correct calls before the outputs turn to zeros")
    grad_input: str | None = Field(None, max_length=64, description="wrong_grad: the input whose gradient is "
                                                                    "wrong (default: the last input)")
    only_at_shape: list[int] | None = Field(None, description="inject the fault only into a graph whose first "
                                                               "output has this shape (one point of a sweep)")


class FaultyBackend(Backend):
    name = "faulty"
    timed_with_events = True
    cache_env = (CACHE_ENV,)
    Options = FaultyOptions
    grad = True

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: FaultyOptions) -> Compiled:
        from bakeoff.workloads.lower_torch import lower_torch

        return self._compile(graph, device, options, lower_torch(graph), None)

    def compile_grad(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                     options: FaultyOptions) -> Compiled:
        from bakeoff.workloads.lower_torch import lower_torch

        names = [n.attr("name") for n in grad_inputs(graph)]
        wanted = options.grad_input or names[-1]
        if wanted not in names:
            raise RuntimeError(f"faulty backend: grad_input {wanted!r} is not an input ({', '.join(names)})")
        # The position of that gradient among the step's results: after the outputs.
        wrong = len(graph.outputs) + names.index(wanted)
        return self._compile(graph, device, options, torch_step(lower_torch(graph), graph), wrong)

    def _compile(self, graph: Graph, device: str, opts: FaultyOptions, fn: Any,
                 wrong_grad: int | None) -> Compiled:
        import torch

        mode = opts.mode
        if opts.only_at_shape is not None and list(graph.output_nodes[0].shape) != list(opts.only_at_shape):
            mode = "none"
        if mode == "compile_error":
            raise RuntimeError("faulty backend: injected compile error")
        scale = opts.scale
        from_cache = _cached(graph)
        calls = [0]

        def run(*xs):
            outs = fn(*xs)
            calls[0] += 1
            if mode == "abort":
                os.abort()
            if mode == "segfault":
                ctypes.string_at(0)
            if mode == "hang":
                while True:
                    time.sleep(1)
            if mode == "run_error":
                raise RuntimeError("faulty backend: injected runtime error")
            if mode == "nan":
                return tuple(torch.full_like(o, float("nan")) for o in outs)
            if mode == "wrong_shape":
                return tuple(o[..., :-1, :] for o in outs)
            if mode == "unwritten":
                return tuple(torch.empty_like(o) for o in outs)
            if mode == "perturb":
                return tuple(o + scale * o.abs().mean() * torch.randn_like(o) for o in outs)
            if mode == "wrong_grad" and wrong_grad is not None:
                g = outs[wrong_grad]
                return (*outs[:wrong_grad], g + scale * g.abs().mean() * torch.randn_like(g), *outs[wrong_grad + 1:])
            if mode == "host_oom" or (mode == "warm_oom" and from_cache):
                hog = []  # bytes(n) is calloc'd: fresh pages, never written, so the cap stops it at once
                while True:
                    hog.append(bytes(2**28))
            if mode == "nonfinite_zero":
                return tuple(o.nan_to_num(0.0, 0.0, 0.0) for o in outs)
            if mode == "zeros" or (mode == "wrong_after" and calls[0] > opts.calls) or (
                    mode == "stale_cache" and from_cache):
                return tuple(torch.zeros_like(o) for o in outs)
            if mode == "spike":
                for o in outs:
                    o.view(-1)[o.numel() // 2] = opts.value
            if mode == "cuda_oom":
                free, total = torch.cuda.mem_get_info()
                torch.empty(total * 2, dtype=torch.uint8, device=device)
            return outs

        notes: list[Any] = [f"faulty mode {mode}"]
        if mode == "bad_info":
            notes.append(RuntimeError("a note that is an object, not text"))
        return TorchCompiled(run, device, CompileInfo(notes=notes, cache_hit=from_cache))


def _cached(graph: Graph) -> bool | None:
    """Whether this graph was compiled before with the same cache folder (a warm process); marks it compiled.
    None without a cache folder."""
    import hashlib
    import json
    from pathlib import Path

    folder = os.environ.get(CACHE_ENV)
    if not folder:
        return None
    marker = Path(folder) / hashlib.sha256(json.dumps(graph.to_json(), sort_keys=True).encode()).hexdigest()
    hit = marker.exists()
    marker.write_text("compiled\n")
    return hit
