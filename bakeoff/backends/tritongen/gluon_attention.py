"""Causal flash attention for Hopper in Gluon: warp-specialised, two consumer warpgroups and a TMA producer.

The Triton-language attention template cannot overlap the softmax with the tensor cores on Hopper (every wgmma is
followed by `wgmma.wait_group 0`), which kept it at about 450 TFLOP/s against cuDNN's 540-610. Gluon
(`triton.experimental.gluon`) exposes what FlashAttention-3 uses, and this kernel is written with it:
- one program = 128 query rows of one head; a 1-warp producer partition loads Q once and K/V tiles (128 keys)
  by TMA into a STAGES-deep ring guarded by ready/empty mbarriers;
- two consumer partitions (one warpgroup, 64 query rows each) run independently: each issues S_i = Q K_i^T and
  O += P_{i-1} V_{i-1} asynchronously, waits for S_i only (`warpgroup_mma_wait(1)`), computes the softmax of
  S_i while the P V product runs, then rescales O; P stays in registers as the A operand;
- key blocks are visited diagonal first (the only masked one) and downwards; query blocks longest first.
Constraints (checked by gluon_support.gluon_attention_reason): causal, 16-bit, head dim 128, sq = sk a multiple of 128, and q/k/v/o each
[heads, seq, 128] with rows contiguous (the 2-D TMA view [heads * seq, 128]). Measured on the H200
(8 x 32 x 4096 x 128): bf16 1.96 ms (561 TFLOP/s) against SDPA's 2.03-2.05, fp16 2.03 against 2.12.

Written against Triton 3.6 (the H200 image); later Triton renamed the TMA copies (async_load/async_store) and the
CTA barrier (barrier), which the aliases below follow. No interpreter runs Gluon: on the CPU the kernel is only compiled for sm_90
(`compile_offline`).
"""
from __future__ import annotations

from typing import Any

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

_tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
_tma_store = tma.async_store if hasattr(tma, "async_store") else tma.async_copy_shared_to_global
_barrier = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier

from bakeoff.backends.tritongen.gluon_support import BLOCK, HEAD_D
STAGES = 2  # K/V ring depth: 2 measured faster than 3 (1.960 vs 1.985 ms bf16)
CONSUMER_REGS = 232  # setmaxnreg of the second consumer warpgroup; the producer keeps 24
_LOG2E = 1.4426950408889634


@gluon.jit
def _softmax(s, m_i, scale, MASK: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
             s_layout: gl.constexpr, ROW0: gl.constexpr):
    """p = exp2(s * scale - m_new), alpha = exp2(m_i - m_new), rowsum(p); m in scaled log2 units."""
    if MASK:  # the diagonal block: key column <= query row (local indices: both blocks start together)
        rows = ROW0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
        cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        s = gl.where(cols[None, :] <= rows[:, None], s, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1) * scale)
    p = gl.exp2(s * scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    return p, m_new, alpha, gl.sum(p, 1)


@gluon.jit
def _producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, k_empty, v_empty, q_row, base,
              col, n_blk, STAGES: gl.constexpr, BLOCK_N: gl.constexpr):
    """Q once, then K/V block n_blk-1-i into slot i % STAGES once both consumers released it."""
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    _tma_load(q_desc, [q_row, col], q_bar, q_smem)
    for i in range(n_blk):
        slot = i % STAGES
        eph = ((i // STAGES) & 1) ^ 1  # the first STAGES uses wait on the phase before the first: no wait
        row = base + (n_blk - 1 - i) * BLOCK_N
        mbarrier.wait(k_empty.index(slot), eph, pred=i >= STAGES)
        mbarrier.expect(k_bar.index(slot), k_desc.block_type.nbytes)
        _tma_load(k_desc, [row, col], k_bar.index(slot), k_smem.index(slot))
        mbarrier.wait(v_empty.index(slot), eph, pred=i >= STAGES)
        mbarrier.expect(v_bar.index(slot), v_desc.block_type.nbytes)
        _tma_load(v_desc, [row, col], v_bar.index(slot), v_smem.index(slot))


@gluon.jit
def _consume(q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, k_empty, v_empty, n_blk, scale, STAGES: gl.constexpr,
             BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_D: gl.constexpr, dtype: gl.constexpr,
             ROW0: gl.constexpr):
    """One warpgroup's key loop over its BLOCK_M query rows (rows ROW0.. of the tile); returns O / l."""
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    orow_layout: gl.constexpr = gl.SliceLayout(1, o_layout)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    acc = gl.zeros([BLOCK_M, HEAD_D], gl.float32, o_layout)
    m_i = gl.full([BLOCK_M], -float("inf"), gl.float32, gl.SliceLayout(1, s_layout))

    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bar.index(0), 0)
    s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    s = warpgroup_mma_wait(0, deps=(s, ))
    _barrier()
    mbarrier.arrive(k_empty.index(0))
    p32, m_i, alpha, l_i = _softmax(s, m_i, scale, True, BLOCK_M, BLOCK_N, s_layout, ROW0)
    p = gl.convert_layout(p32.to(dtype), p_layout)
    for i in range(1, n_blk):
        slot = i % STAGES
        pslot = (i - 1) % STAGES
        mbarrier.wait(k_bar.index(slot), (i // STAGES) & 1)
        mbarrier.wait(v_bar.index(pslot), ((i - 1) // STAGES) & 1)
        s_tok = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        acc_tok = warpgroup_mma(p, v_smem.index(pslot), acc, is_async=True)
        s = warpgroup_mma_wait(1, deps=(s_tok, ))  # S_i ready, P V still running under the softmax below
        _barrier()
        mbarrier.arrive(k_empty.index(slot))
        p32, m_new, alpha, l_blk = _softmax(s, m_i, scale, False, BLOCK_M, BLOCK_N, s_layout, ROW0)
        acc, p = warpgroup_mma_wait(0, deps=(acc_tok, p))
        _barrier()
        mbarrier.arrive(v_empty.index(pslot))
        acc = acc * gl.convert_layout(alpha, orow_layout)[:, None]
        l_i = l_i * alpha + l_blk
        m_i = m_new
        p = gl.convert_layout(p32.to(dtype), p_layout)
    last = n_blk - 1
    mbarrier.wait(v_bar.index(last % STAGES), (last // STAGES) & 1)
    acc = warpgroup_mma(p, v_smem.index(last % STAGES), acc, use_acc=n_blk > 1, is_async=True)
    acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    return acc / gl.convert_layout(l_i, orow_layout)[:, None]


@gluon.jit
def _consumer(o_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, k_empty, v_empty, n_blk, scale, q_row, col,
              WG: gl.constexpr, STAGES: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_D: gl.constexpr,
              dtype: gl.constexpr):
    """Warpgroup WG: query rows 64 * WG .. of the tile; stores its own 64 output rows by TMA."""
    q_sub = q_smem.slice(64 * WG, 64, dim=0)
    out = _consume(q_sub, k_smem, v_smem, q_bar, k_bar, v_bar, k_empty, v_empty, n_blk, scale, STAGES, 64,
                   BLOCK_N, HEAD_D, dtype, 64 * WG)
    q_sub.store(out.to(dtype))
    fence_async_shared()
    _barrier()
    _tma_store(o_desc, [q_row + 64 * WG, col], q_sub)
    tma.store_wait(pendings=0)


@gluon.jit
def attention_ws(q_desc, k_desc, v_desc, o_desc, scale, SEQ: gl.constexpr, HEADS: gl.constexpr, SB: gl.constexpr,
                 SH: gl.constexpr, SS: gl.constexpr, STAGES: gl.constexpr, REGS: gl.constexpr,
                 num_warps: gl.constexpr):
    """Causal attention, grid (SEQ / 128, heads); q/k/v/o descriptors over 2-D views [numel / SS, SS] of their
    buffers (gluon_support.tma_rows: head i starts at offset (i // HEADS) * SB + (i % HEADS) * SH), o's block
    64 rows."""
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_D: gl.constexpr = q_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype
    gl.static_assert(BLOCK_M == BLOCK_N)
    gl.static_assert(BLOCK_M == 128)
    gl.static_assert(num_warps == 4)
    start_m = gl.num_programs(0) - 1 - gl.program_id(0)
    off = (gl.program_id(1) // HEADS) * SB + (gl.program_id(1) % HEADS) * SH
    base = off // SS
    col = off % SS
    q_row = base + start_m * BLOCK_M
    n_blk = (start_m * BLOCK_M + BLOCK_M) // BLOCK_N

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_D], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_D], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bar = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bar.index(i), count=1)
        mbarrier.init(v_bar.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)  # both consumers release a slot
        mbarrier.init(v_empty.index(i), count=2)
    fence_async_shared()

    gl.warp_specialize([
        (_consumer, (o_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, k_empty, v_empty, n_blk, scale, q_row, col,
                     0, STAGES, BLOCK_N, HEAD_D, dtype)),
        (_consumer, (o_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, k_empty, v_empty, n_blk, scale, q_row, col,
                     1, STAGES, BLOCK_N, HEAD_D, dtype)),
        (_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, k_empty, v_empty, q_row,
                     base, col, n_blk, STAGES, BLOCK_N)),
    ], [4, 1], [REGS, 24])

    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_bar.index(i))
        mbarrier.invalidate(v_bar.index(i))
        mbarrier.invalidate(k_empty.index(i))
        mbarrier.invalidate(v_empty.index(i))


def _layout(rows: int, dtype: Any) -> Any:
    import torch

    return gl.NVMMASharedLayout.get_default_for([rows, HEAD_D], gl.bfloat16 if dtype == torch.bfloat16
                                                else gl.float16)


class Launch:
    """What the launcher calls like a jit function: `launch[grid](q, k, v, o)` builds host TMA descriptors over
    2-D views [numel / SS, SS] of the buffers (`rows`: gluon_support.tma_rows' HEADS, SB, SH, SS) and launches
    `attention_ws` (its own grid; `grid` is ignored); `warmup` compiles it for the buffers (or their dtypes)."""

    def __init__(self, seq: int, heads: int, scale_log2: float, rows: tuple[int, int, int, int] = (1, 0, 0, 0)
                 ) -> None:
        self.seq, self.scale = seq, scale_log2
        self.grid = (seq // BLOCK, heads)
        h, sb, sh, ss = rows if rows[3] else (1, seq * HEAD_D, 0, HEAD_D)  # default: [heads, seq, 128]
        self.consts = {"SEQ": seq, "HEADS": h, "SB": sb, "SH": sh, "SS": ss, "STAGES": STAGES,
                       "REGS": CONSUMER_REGS, "num_warps": 4}

    def __getitem__(self, grid: Any) -> Any:
        return self._run

    def _descs(self, tensors: tuple) -> list:
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        ss = self.consts["SS"]
        return [TensorDescriptor.from_tensor(t.view(-1, ss), [r, HEAD_D], _layout(r, t.dtype))
                for t, r in zip(tensors, (BLOCK, BLOCK, BLOCK, 64))]

    def _run(self, q: Any, k: Any, v: Any, o: Any, **_: Any) -> Any:
        return attention_ws[self.grid](*self._descs((q, k, v, o)), self.scale, **self.consts)

    def warmup(self, q: Any, k: Any, v: Any, o: Any, **_: Any) -> Any:
        """Compile for these buffers; given dtypes, one-block tensors of that dtype stand in (the descriptors'
        shapes are launch arguments, not compile-time facts)."""
        import torch

        if isinstance(q, torch.dtype):
            q, k, v, o = (torch.empty((BLOCK, self.consts["SS"]), dtype=t, device="cuda") for t in (q, k, v, o))
        return attention_ws.warmup(*self._descs((q, k, v, o)), self.scale, **self.consts, grid=self.grid)


def compile_offline(dtype: str = "bfloat16", seq: int = 4096, arch: int = 90,
                    rows: tuple[int, int, int, int] = (1, 0, 0, 0)) -> Any:
    """Triton's CompiledKernel of `attention_ws` for sm_`arch` (`rows` as Launch's), compiled without a GPU (no
    interpreter runs Gluon: this is the CPU's check of the kernel)."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    tdt, short = (torch.bfloat16, "bf16") if dtype == "bfloat16" else (torch.float16, "fp16")
    sizes = {"q_desc": BLOCK, "k_desc": BLOCK, "v_desc": BLOCK, "o_desc": 64}
    sig = {a: f"tensordesc<{short}[{r}, {HEAD_D}],{_layout(r, tdt)!r}>" for a, r in sizes.items()}
    consts = Launch(seq, 1, 1.0, rows).consts
    sig |= {"scale": "fp32"} | {c: "constexpr" for c in consts}
    return triton.compile(GluonASTSource(attention_ws, sig, constexprs=consts), target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": 4})
