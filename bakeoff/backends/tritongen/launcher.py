"""Stage 4, launch: allocate the buffers kernels write, launch the kernels in order, return output views.

`run` does no host synchronisation and allocates only through torch's caching allocator, so it can be captured
in a CUDA graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from bakeoff.backends.base import Compiled, CompileInfo

from bakeoff.backends.tritongen.source import KernelSource
from bakeoff.backends.tritongen.configs import Config, launches
from bakeoff.backends.tritongen.kernel_plan import Plan


@dataclass(frozen=True)
class Step:
    """One kernel launch: the jit function, its grid, pointer arguments (buffer names) and keyword arguments."""

    fn: Callable
    grid: tuple[int, ...]
    params: tuple[str, ...]
    kwargs: dict[str, Any]


def build_steps(sources: Sequence[KernelSource], modules: Sequence[Any], configs: Sequence[Config]) -> list[Step]:
    """Every kernel's launches, in plan order, under its chosen config (one each; a pre-split float32 matmul
    splits its operands first); `sources` as they run and `modules` loaded from them (shared.shared_kernels:
    a kernel equal to an earlier one up to names calls its functions)."""
    return [Step(getattr(mod, fn), grid, params, kwargs)
            for src, mod, cfg in zip(sources, modules, configs) for fn, grid, params, kwargs in launches(src, cfg)]


class TritonGenCompiled(Compiled):
    """The executable: a plan's buffers and kernel launches."""

    def __init__(self, plan: Plan, steps: list[Step], device: str, info: CompileInfo,
                 artifacts: dict[str, Any], scratch: Sequence[tuple[str, tuple[int, ...]]] = ()) -> None:
        import torch

        from bakeoff.workloads.lower_torch import TORCH_DTYPES

        self.plan, self.steps, self.device, self.info = plan, steps, device, info
        self._artifacts = artifacts
        self._inputs = [(b.name, b.index) for b in plan.buffers if b.role == "input"]
        ints = lambda xs: tuple(int(x) for x in xs)  # noqa: E731 (a sweep's SymDims as plain ints)
        self._allocs = [(b.name, ints(b.shape), TORCH_DTYPES[b.dtype]) for b in plan.buffers if b.role != "input"]
        self._allocs += [(name, ints(shape), torch.float32) for name, shape in scratch]  # split operand planes
        self._outs = [(v.buffer, ints(v.shape), ints(v.strides), int(v.offset)) for v in plan.outputs]
        self._torch = torch

    def prepare(self, inputs: Sequence[Any]) -> Any:
        return tuple(x.contiguous() for x in inputs)

    def run(self, prepared: Any) -> Any:
        torch = self._torch
        env = {name: prepared[i] for name, i in self._inputs}
        for name, shape, dtype in self._allocs:
            env[name] = torch.empty(shape, dtype=dtype, device=self.device)
        for s in self.steps:
            s.fn[s.grid](*[env[p] for p in s.params], **s.kwargs)
        return tuple(torch.as_strided(env[b], shape, strides, off) for b, shape, strides, off in self._outs)

    def to_torch(self, raw: Any) -> list[Any]:
        return list(raw)

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            self._torch.cuda.synchronize()

    def artifacts(self) -> dict[str, Any] | None:
        return self._artifacts
