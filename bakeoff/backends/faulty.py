"""A test-only backend that fails on purpose, driven by its `mode` option. Hidden from `list backends`.

Modes: none (behaves like eager), abort (os.abort in run), segfault (a null read through ctypes), hang
(sleeps forever in run), compile_error, run_error, nan (outputs NaN), wrong_shape (drops the last row),
unwritten (returns torch.empty: never written), perturb (adds relative noise of `scale`), host_oom
(allocates until the host memory cap stops it), cuda_oom (asks the GPU for more than it has), bad_info
(runs like eager but puts an exception object, not its text, in its compile notes).
"""
from __future__ import annotations

import ctypes
import os
import time
from typing import Any, Sequence

from bakeoff.workloads.ir import Graph

from bakeoff.backends.base import Backend, Compiled, CompileInfo, TensorSpec, TorchCompiled

MODES = ("none", "abort", "segfault", "hang", "compile_error", "run_error", "nan", "wrong_shape", "unwritten",
         "perturb", "host_oom", "cuda_oom", "bad_info")


class FaultyBackend(Backend):
    name = "faulty"
    timed_with_events = True

    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: dict[str, Any]) -> Compiled:
        import torch

        from bakeoff.workloads.lower_torch import lower_torch

        mode = options.get("mode", "none")
        if mode not in MODES:
            raise ValueError(f"faulty: unknown mode {mode!r}; modes: {', '.join(MODES)}")
        if mode == "compile_error":
            raise RuntimeError("faulty backend: injected compile error")
        fn = lower_torch(graph)
        scale = float(options.get("scale", 1e-2))

        def run(*xs):
            outs = fn(*xs)
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
            if mode == "host_oom":
                hog = []
                while True:
                    hog.append(bytearray(2**28))
            if mode == "cuda_oom":
                free, total = torch.cuda.mem_get_info()
                torch.empty(total * 2, dtype=torch.uint8, device=device)
            return outs

        notes: list[Any] = [f"faulty mode {mode}"]
        if mode == "bad_info":
            notes.append(RuntimeError("a note that is an object, not text"))
        return TorchCompiled(run, device, CompileInfo(notes=notes))
