"""Which attention cases the Gluon kernel (gluon_attention.py) computes: decided without importing Triton."""
from __future__ import annotations

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
