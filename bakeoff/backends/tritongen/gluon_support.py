"""Which attention cases the Gluon kernel (gluon_attention.py) computes: the case's facts decided without
importing Triton; whether this Triton has the Gluon API the kernel uses, checked once (GPU codegen only)."""
from __future__ import annotations

import functools

BLOCK = 128  # the kernel's query and key tile rows (one diagonal block per query block)
HEAD_D = 128


def gluon_attention_reason(sq, sk, d, dv, causal: bool, dtype: str, views: list,
                           numels: list[int] | None = None) -> str | None:
    """None when gluon_attention's kernel computes this attention, else why not (the template's kernel runs):
    causal, 16-bit, sq = sk a multiple of 128 and not a sweep's runtime dim, head dims 128, and q/k/v/o laid out
    as `tma_rows` can read them (`numels`: each view's buffer's element count)."""
    if not causal:
        return "not causal"
    if dtype not in ("bfloat16", "float16"):
        return f"{dtype}: 16-bit only"
    if type(sq) is not int or type(sk) is not int or sq != sk or sq % BLOCK or d != HEAD_D or dv != HEAD_D:
        return "needs sq = sk, a multiple of 128 (not a sweep's runtime dim), head dims 128"
    rows = tma_rows(views, numels)
    return rows if isinstance(rows, str) else None


def tma_rows(views: list, numels: list[int] | None = None) -> tuple[int, int, int, int] | str:
    """(HEADS, SB, SH, SS): how the kernel finds head `i` of q/k/v/o in one 2-D TMA view [numel / SS, SS] of each
    buffer: off = (i // HEADS) * SB + (i % HEADS) * SH, its rows start at row off // SS, column off % SS, and
    successive positions are successive rows. Covers [heads, seq, 128] buffers (SS = 128) and projections read as
    heads without a copy ([batch, seq, heads * 128], SS = heads * 128). A string says why a layout is not covered:
    the four views must share their strides, with offset 0, 128 contiguous elements a row, 16-byte aligned rows,
    at most two leading dims after merging, each head's 128 columns inside one row, buffers under 2^31 elements."""
    first = views[0]
    if any(tuple(v.strides) != tuple(first.strides) or v.offset for v in views):
        return "q/k/v/o strides differ or start past offset 0"
    shape, strides = [int(x) for x in first.shape[:-2]], [int(x) for x in first.strides[:-2]]
    ss = int(first.strides[-2])
    if first.strides[-1] != 1 or ss < HEAD_D or ss % 8:
        return f"{first.buffer}: rows not 128 contiguous elements with 16-byte aligned row starts"
    merged: list[tuple[int, int]] = []  # (size, stride), adjacent dims that index like one merged
    for n, st in zip(shape, strides):
        if merged and merged[-1][1] == st * n:
            merged[-1] = (merged[-1][0] * n, st)
        elif n != 1:
            merged.append((n, st))
    if len(merged) > 2:
        return "more than two leading dims that do not merge"
    (outer, sb), (heads, sh) = ([(1, 0)] * (2 - len(merged))) + merged
    if outer * heads > 1 << 20 or any(n >= 1 << 31 for n in numels or []):
        return "too many heads or elements for 32-bit offsets"
    cols = {(b * sb + h * sh) % ss for b in range(outer) for h in range(heads)}
    if max(cols) + HEAD_D > ss:
        return f"{first.buffer}: a head's 128 columns cross a row of the 2-D view"
    if numels and any(n % ss for n in numels):
        return "a buffer is not whole rows of the 2-D view"
    return heads, sb, sh, ss


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
