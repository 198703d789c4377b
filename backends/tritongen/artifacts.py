"""What a compile leaves to keep: the partition, the source and config per kernel, and on the GPU Triton's IRs.

IR text, registers and shared memory come from Triton's compiled kernels; under the interpreter there are
none, and the fields say so with None rather than inventing numbers.
"""
from __future__ import annotations

from typing import Any, Sequence

from .codegen import KernelSource
from .configs import Config
from .plan import Plan

_IRS = ("ttir", "ttgir", "llir", "ptx")


def _compiled_facts(ck: Any) -> dict[str, Any]:
    if ck is None:
        return {ir: None for ir in _IRS} | {"n_regs": None, "n_spills": None, "shared_bytes": None}
    if hasattr(ck, "_init_handles"):
        ck._init_handles()  # loads the binary: fills n_regs / n_spills
    asm = getattr(ck, "asm", {}) or {}
    out: dict[str, Any] = {}
    for ir in _IRS:
        text = asm.get(ir)
        out[ir] = text if isinstance(text, str) else None
        out[f"{ir}_bytes"] = len(text) if isinstance(text, str) else None
    meta = getattr(ck, "metadata", None)
    out["n_regs"] = getattr(ck, "n_regs", None)
    out["n_spills"] = getattr(ck, "n_spills", None)
    out["shared_bytes"] = getattr(meta, "shared", None)
    return out


def collect(plan: Plan, sources: Sequence[KernelSource], configs: Sequence[Config],
            compiled: Sequence[Any] | None, notes: list[str]) -> dict[str, Any]:
    """The artifacts dict of one compile. `compiled` None (interpreter): IR fields are None."""
    kernels = {}
    for i, (src, cfg) in enumerate(zip(sources, configs)):
        facts = _compiled_facts(compiled[i] if compiled else None)
        kernels[src.fn] = {"kind": src.kernel.kind, "variant": src.variant or None, "source": src.text,
                           "config": dict(cfg), "source_nodes": list(src.kernel.origin), **facts}
    return {"partition": plan.text(), "kernel_count": len(sources), "kernels": kernels,
            "ir_note": None if compiled else "Triton interpreter: no TTIR/TTGIR/LLVM IR/PTX, registers or "
                                             "shared memory exist",
            "tune_log": list(notes)}
