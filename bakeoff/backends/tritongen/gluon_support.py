"""Which attention cases the Gluon kernel (gluon_attention.py) computes: the case's facts decided without
importing Triton; whether this Triton has the Gluon API the kernel uses, checked once (GPU codegen only)."""
from __future__ import annotations

import functools
import math

BLOCK = 128  # the kernel's query and key tile rows (one diagonal block per query block)
HEAD_D = 128


def gluon_attention_reason(sq, sk, d, dv, causal: bool, dtype: str, views: list) -> str | None:
    """None when gluon_attention's kernel computes this attention, else why not (the template's kernel runs):
    causal, 16-bit, sq = sk a multiple of 128 and not a sweep's runtime dim, head dims 128, and q/k/v/o each
    [heads, seq, 128] with contiguous rows from offset 0 (the kernel's 2-D TMA view [heads * seq, 128])."""
    if not causal:
        return "not causal"
    if dtype not in ("bfloat16", "float16"):
        return f"{dtype}: 16-bit only"
    if type(sq) is not int or type(sk) is not int or sq != sk or sq % BLOCK or d != HEAD_D or dv != HEAD_D:
        return "needs sq = sk, a multiple of 128 (not a sweep's runtime dim), head dims 128"
    for v in views:
        seq = int(v.shape[-2])
        expect = tuple(seq * HEAD_D * math.prod(int(x) for x in v.shape[i + 1:-2]) for i in range(len(v.shape) - 2))
        if v.offset or v.strides[-1] != 1 or v.strides[-2] != HEAD_D or tuple(v.strides[:-2]) != expect:
            return f"{v.buffer}: not [heads, seq, 128] with contiguous rows"
    return None


@functools.cache
def gluon_missing() -> str | None:
    """None when this Triton has the Gluon API gluon_attention uses (Hopper wgmma, TMA, mbarriers, warp
    specialisation, host tensor descriptors), else what is missing."""
    try:
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.language.nvidia import hopper
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: F401
    except Exception as exc:  # an older Triton: the template's kernel runs instead
        return f"no Gluon Hopper API in this Triton: {type(exc).__name__}: {str(exc)[:120]}"
    need = [(hopper, "warpgroup_mma"), (hopper, "warpgroup_mma_wait"), (hopper, "mbarrier"), (hopper, "tma"),
            (hopper, "fence_async_shared"), (gl, "warp_specialize"), (gl, "NVMMADistributedLayout")]
    missing = [name for mod, name in need if not hasattr(mod, name)]
    if not (hasattr(gl, "barrier") or hasattr(gl, "thread_barrier")):
        missing.append("barrier")
    if hasattr(hopper, "tma") and not (hasattr(hopper.tma, "async_load")
                                       or hasattr(hopper.tma, "async_copy_global_to_shared")):
        missing.append("tma.async_load")
    return f"this Triton's Gluon lacks {', '.join(missing)}" if missing else None
