"""What a compile leaves to keep: the partition, the source and config per kernel, and on the GPU Triton's IRs.

Text goes under file-like keys (the harness writes string artifacts to files): `partition.txt`,
`<kernel>.py`, and on the GPU `<kernel>.ttir|.ttgir|.llir|.ptx`. Numbers go under `kernels` (config,
registers, spills, shared memory, IR sizes). Under the interpreter there is no compiled kernel: the IR texts are
absent and their numbers None, rather than invented.
"""
from __future__ import annotations

from typing import Any, Sequence

from bakeoff.backends.tritongen.source import KernelSource
from bakeoff.backends.tritongen.configs import Config
from bakeoff.backends.tritongen.kernel_plan import Plan

_IRS = ("ttir", "ttgir", "llir", "ptx")


def _compiled_facts(ck: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """(numbers, IR texts) of one Triton CompiledKernel; None numbers and no texts when `ck` is None."""
    if ck is None:
        return {f"{ir}_bytes": None for ir in _IRS} | {"n_regs": None, "n_spills": None, "shared_bytes": None}, {}
    if hasattr(ck, "_init_handles"):
        ck._init_handles()  # loads the binary: fills n_regs / n_spills
    asm = getattr(ck, "asm", {}) or {}
    texts = {ir: asm[ir] for ir in _IRS if isinstance(asm.get(ir), str)}
    facts: dict[str, Any] = {f"{ir}_bytes": len(texts[ir]) if ir in texts else None for ir in _IRS}
    facts["n_regs"] = getattr(ck, "n_regs", None)
    facts["n_spills"] = getattr(ck, "n_spills", None)
    facts["shared_bytes"] = getattr(getattr(ck, "metadata", None), "shared", None)
    return facts, texts


def collect(plan: Plan, sources: Sequence[KernelSource], configs: Sequence[Config],
            compiled: Sequence[Any] | None, log: list[str]) -> dict[str, Any]:
    """The artifacts dict of one compile. `compiled` None (interpreter): no IR texts, None IR numbers."""
    out: dict[str, Any] = {"partition.txt": plan.text()}
    kernels = {}
    for i, (src, cfg) in enumerate(zip(sources, configs)):
        facts, texts = _compiled_facts(compiled[i] if compiled else None)
        out[f"{src.fn}.py"] = src.text
        out.update({f"{src.fn}.{ir}": text for ir, text in texts.items()})
        kernels[src.fn] = {"kind": src.kernel.kind, "variant": src.variant or None, "config": dict(cfg),
                           "source_nodes": list(src.kernel.origin), **facts}
    out["kernels"] = kernels
    out["kernel_count"] = len(sources)
    out["ir_note.txt"] = None if compiled else ("Triton interpreter: no TTIR/TTGIR/LLVM IR/PTX, registers or shared "
                                            "memory exist")
    out["tune_log"] = list(log)
    return out
