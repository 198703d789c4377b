"""Template: flash attention (sdpa node) with online softmax and fp32 accumulators, causal or not.

One program = BLOCK_M query rows of one (batch, head). Key blocks wholly visible run without masks; the
diagonal (causal) and ragged blocks run masked; causal programs start with the longest rows (a shorter tail).
Scores use exp2 with the softmax scale folded into log2(e) and into one FMA per score.
q, k, v and the output are read and written through their strides, so head split/merge layouts are free.
On the GPU, when the layouts allow, a twin `<name>_tma` reads q/k/v and writes the output through per-head 2-D
TMA descriptors (the config's TMA=1 picks it); float32 products use the target's `fp32_dot` precision.
float32 also gets a pre-split 3xTF32 twin `<name>_s3` (SPLIT=1): Q, K and V^T are split once into TF32 hi/lo
planes (codegen_split.py), read per head through TMA; each product is three TF32 dots from a zero accumulator
(small products first) and P is split in registers, so P @ V's sum over key blocks is added in float32.
"""
from __future__ import annotations

import math

from bakeoff.workloads.decompose import sdpa_scale

from bakeoff.backends.tritongen.codegen_split import Planes, padded, split_info
from bakeoff.backends.tritongen.gluon_support import gluon_attention_reason, gluon_missing, tma_rows
from bakeoff.backends.tritongen.source import header, KernelSource, CodegenTarget, wide
from bakeoff.backends.tritongen.indexing import linear_offset
from bakeoff.backends.tritongen.kernel_plan import Kernel, Plan
from bakeoff.backends.tritongen.views import broadcast_view
from bakeoff.backends.tritongen.symdim import dims

_LOG2E = 1.4426950408889634


def _pow2(x: int) -> int:
    return max(16, 1 << max(x - 1, 0).bit_length())


def _tma_ok(plan: Plan, views: list, d: int, dv: int, bd: int, bdv: int) -> bool:
    """TMA descriptors need power-of-two head dims of >= 16 bytes, unit inner strides, 16-byte-aligned row
    strides, head offsets and view offsets."""
    from bakeoff.workloads.ir import ITEMSIZE

    if bd != d or bdv != dv:
        return False
    for v in views:
        size = ITEMSIZE[plan.buffer(v.buffer).dtype]
        if v.strides[-1] != 1 or v.shape[-1] * size < 16 or any((s * size) % 16 for s in v.strides[:-1]) \
                or (v.offset * size) % 16:
            return False
    return True


def generate(plan: Plan, kernel: Kernel, target: CodegenTarget) -> KernelSource:
    g = plan.graph
    node = g.node(kernel.anchor)
    loads = dict(kernel.loads)
    out_shape = dims(node.shape)
    batch = out_shape[:-2]
    sq, dv = out_shape[-2:]
    qn, kn, vn = (g.node(i) for i in node.inputs)
    d = dims(qn.shape)[-1]
    sk = dims(kn.shape)[-2]
    q = broadcast_view(loads[qn.id], batch + (sq, d))
    k = broadcast_view(loads[kn.id], batch + (sk, d))
    v = broadcast_view(loads[vn.id], batch + (sk, dv))
    o = dict(kernel.stores)[node.id]
    bd, bdv = _pow2(d), _pow2(dv)
    tma = target.tma and _tma_ok(plan, [q, k, v, o], d, dv, bd, bdv)
    a = _Attn(kernel, target, q, k, v, o, batch, sq, sk, d, dv, bd, bdv, sdpa_scale(node, d) * _LOG2E,
              bool(node.attr("causal")))
    lines = a.function("")
    if tma:
        lines += ["", ""] + a.function("_tma")
    info = None
    if target.split_tf32() and bd == d and bdv == dv:
        planes = a.planes()
        info = split_info(kernel.name, planes)
        i64 = ".to(tl.int64)" if wide(plan, kernel) else ""
        for p, (fn, _, _) in zip(planes, info["launches"]):
            lines += ["", ""] + p.function(fn, i64)
        lines += ["", ""] + a.split_function()
    gluon = None
    numels = [math.prod(int(x) for x in plan.buffer(t.buffer).shape) for t in (q, k, v, o)]
    if target.arch == 90 and not target.interpret and gluon_attention_reason(
            sq, sk, d, dv, a.causal, target.dtype, [q, k, v, o], numels) is None and gluon_missing() is None:
        gluon = (q.buffer, k.buffer, v.buffer, o.buffer)
        lines += ["", "", "# Hopper: the warp-specialised Gluon kernel (gluon_attention.py), picked by GLUON=1",
                  "from bakeoff.backends.tritongen.gluon_attention import Launch as _GluonLaunch  # noqa: E402",
                  f"{kernel.name}_gl = _GluonLaunch({sq}, {math.prod(batch)}, {a.scale!r}, "
                  f"{tma_rows([q, k, v, o], numels)!r})"]
    text = header(f"attention kernel {kernel.name}", target) + "\n".join(lines) + "\n"
    return KernelSource(kernel, kernel.name, text, kernel.buffers(), {"sq": sq, "sk": sk, "heads": math.prod(batch),
                                                                      "d": d}, "tma" if tma else "", split=info,
                        gluon=gluon)


class _Attn:
    """One attention kernel's facts, and its jit functions: pointer loads ('') or TMA descriptor loads ('_tma')."""

    def __init__(self, kernel, target, q, k, v, o, batch, sq, sk, d, dv, bd, bdv, scale, causal):
        self.kernel, self.target = kernel, target
        self.q, self.k, self.v, self.o = q, k, v, o
        self.batch, self.sq, self.sk, self.d, self.dv, self.bd, self.bdv = batch, sq, sk, d, dv, bd, bdv
        self.scale, self.causal = scale, causal
        self.dmask = "" if bd == d else f" & (offs_d[None, :] < {d})"
        self.dvmask = "" if bdv == dv else f" & (offs_dv[None, :] < {dv})"

    def base(self, t) -> str:
        return f"{t.buffer} + {linear_offset('off_b', self.batch, t.strides[:-2])} + {t.offset}"

    def softmax(self, masked: bool) -> list[str]:
        """The block's scores `qk` masked (diagonal / ragged blocks), then the online-softmax update: m_new, p,
        alpha, l_i."""
        ind = "        "
        out = []
        if masked:
            valid = f"(offs_n[None, :] < {self.sk})" + (" & (offs_n[None, :] <= offs_m[:, None])" if self.causal
                                                        else "")
            out.append(f'{ind}qk = tl.where({valid}, qk, -float("inf"))')
        return out + [f"{ind}m_new = tl.maximum(m_i, tl.max(qk, 1) * {self.scale!r})  # running max, in log2 units",
                      f"{ind}p = _exp2(qk * {self.scale!r} - m_new[:, None])  # scale folded into one FMA",
                      f"{ind}alpha = _exp2(m_i - m_new)",
                      f"{ind}l_i = l_i * alpha + tl.sum(p, 1)"]

    def block(self, masked: bool, tma: bool) -> list[str]:
        """One key block: scores, online-softmax update, P @ V; `masked` for the diagonal / ragged blocks."""
        k, v, sk, t = self.k, self.v, self.sk, self.target
        ind = "        "
        out = [f"{ind}offs_n = start_n + offs_n0"]
        if tma:
            out.append(f"{ind}kt = k_desc.load([start_n, 0])")
        else:
            kmask = f"(offs_n[:, None] < {sk}){self.dmask}" if masked else (self.dmask[3:] if self.dmask else "")
            km = f", mask={kmask}, other=0.0" if kmask else ""
            out.append(f"{ind}kt = tl.load(k_base + offs_n[:, None] * {k.strides[-2]} + offs_d[None, :] * "
                       f"{k.strides[-1]}{km})")
        kw = t.dot_kwargs("attention")
        out.append(f"{ind}qk = tl.dot({t.dot_operand('q')}, {t.dot_operand('tl.trans(kt)')}{kw})")
        out += self.softmax(masked) + [f"{ind}acc = acc * alpha[:, None]"]
        if tma:
            out.append(f"{ind}vt = v_desc.load([start_n, 0])")
        else:
            vmask = f"(offs_n[:, None] < {sk}){self.dvmask}" if masked else (self.dvmask[3:] if self.dvmask else "")
            vm = f", mask={vmask}, other=0.0" if vmask else ""
            out.append(f"{ind}vt = tl.load(v_base + offs_n[:, None] * {v.strides[-2]} + offs_dv[None, :] * "
                       f"{v.strides[-1]}{vm})")
        out += [f"{ind}acc = tl.dot({t.dot_operand('p.to(vt.dtype)')}, {t.dot_operand('vt')}, acc{kw})",
                f"{ind}m_i = m_new"]
        return out

    def planes(self) -> list[Planes]:
        """Q (sq x d), K (sk x d) and V^T (dv x sk) of every head, read through their strides, as TF32 planes."""
        q, k, v, heads = self.q, self.k, self.v, math.prod(self.batch)
        name = self.kernel.name
        head = lambda t: linear_offset("h", self.batch, t.strides[:-2])  # noqa: E731
        return [Planes(f"{name}_q", q.buffer, f"{q.buffer} + {head(q)} + {q.offset} + r * {q.strides[-2]} + c * "
                       f"{q.strides[-1]}", heads, self.sq, self.d, "Q"),
                Planes(f"{name}_k", k.buffer, f"{k.buffer} + {head(k)} + {k.offset} + r * {k.strides[-2]} + c * "
                       f"{k.strides[-1]}", heads, self.sk, self.d, "K"),
                Planes(f"{name}_v", v.buffer, f"{v.buffer} + {head(v)} + {v.offset} + c * {v.strides[-2]} + r * "
                       f"{v.strides[-1]}", heads, self.dv, self.sk, "V^T")]

    def split_block(self, masked: bool) -> list[str]:
        """One key block of the pre-split twin: QK^T and P @ V as three TF32 dots each."""
        ind, tf = "        ", ", input_precision=\"tf32\""
        out = [f"{ind}offs_n = start_n + offs_n0",
               f"{ind}kh = khi_desc.load([start_n, 0])",
               f"{ind}kl = klo_desc.load([start_n, 0])",
               f"{ind}qk = tl.dot(ql, tl.trans(kh){tf})  # small products first, from zero",
               f"{ind}qk = tl.dot(qh, tl.trans(kl), qk{tf})",
               f"{ind}qk = tl.dot(qh, tl.trans(kh), qk{tf})"]
        out += self.softmax(masked)
        out += [f"{ind}ph = _tf32(p)",
                f"{ind}pl = _tf32(p - ph)",
                f"{ind}vh = vhi_desc.load([0, start_n])",
                f"{ind}vl = vlo_desc.load([0, start_n])",
                f"{ind}pv = tl.dot(pl, tl.trans(vh){tf})",
                f"{ind}pv = tl.dot(ph, tl.trans(vl), pv{tf})",
                f"{ind}pv = tl.dot(ph, tl.trans(vh), pv{tf})",
                f"{ind}acc = acc * alpha[:, None] + pv  # float32 add: the tensor cores' accumulation truncates",
                f"{ind}m_i = m_new"]
        if self.target.interpret:
            out = [line.replace(tf, "") for line in out]
        return out

    def split_function(self) -> list[str]:
        """`<name>_s3`: flash attention on pre-split TF32 planes of Q, K and V^T, read per head through TMA."""
        sq, sk, d, dv, o, name = self.sq, self.sk, self.d, self.dv, self.o, self.kernel.name
        dp, skp = padded(d), padded(sk)
        causal = self.causal
        n_full = (f"(tl.minimum(start_m * BLOCK_M, {sk}) // BLOCK_N) * BLOCK_N" if causal
                  else f"({sk} // BLOCK_N) * BLOCK_N")
        n_end = f"tl.minimum((start_m + 1) * BLOCK_M, {sk})" if causal else str(sk)
        params = self.kernel.buffers() + tuple(f"{name}_{t}{w}" for t in "qkv" for w in ("hi", "lo"))
        lines = [
            "@triton.jit",
            f"def {name}_s3({', '.join(params)}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):",
            f'    """Flash attention{" (causal)" if causal else ""}, 3xTF32 on pre-split planes through TMA: '
            f'{math.prod(self.batch)} heads, {sq} queries x {sk} keys, head dim {d}; one program = BLOCK_M queries."""',
            "    start_m = tl.num_programs(0) - 1 - tl.program_id(0)  # longest (causal) query blocks first" if causal
            else "    start_m = tl.program_id(0)",
            "    off_b = tl.program_id(1)",
            "    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)",
            "    offs_n0 = tl.arange(0, BLOCK_N)",
            f"    offs_dv = tl.arange(0, {dv})",
        ]
        for t, rows, cols, colp, blk in (("q", sq, d, dp, "BLOCK_M"), ("k", sk, d, dp, "BLOCK_N"),
                                          ("v", dv, sk, skp, None)):
            for w in ("hi", "lo"):
                block = f"[{blk}, {cols}]" if blk else f"[{dv}, BLOCK_N]"
                lines.append(f"    {t}{w}_desc = tl.make_tensor_descriptor({name}_{t}{w} + off_b * {int(rows) * colp}, "
                             f"shape=[{rows}, {cols}], strides=[{colp}, 1], block_shape={block})")
        lines += [
            "    qh = qhi_desc.load([start_m * BLOCK_M, 0])",
            "    ql = qlo_desc.load([start_m * BLOCK_M, 0])",
            "    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float(\"inf\")",
            "    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)",
            f"    acc = tl.zeros([BLOCK_M, {dv}], dtype=tl.float32)",
            f"    n_full = {n_full}",
            "    for start_n in range(0, n_full, BLOCK_N):  # wholly visible key blocks: no masks",
            *self.split_block(False),
            f"    for start_n in range(n_full, {n_end}, BLOCK_N):  # diagonal / ragged key blocks",
            *self.split_block(True),
            "    acc = acc * _rcp(l_i)[:, None]",
            f"    o_base = {self.base(o)}",
            f"    tl.store(o_base + offs_m[:, None] * {o.strides[-2]} + offs_dv[None, :] * {o.strides[-1]}, "
            f"acc.to({o.buffer}.dtype.element_ty), mask=(offs_m[:, None] < {sq}))",
        ]
        return lines

    def function(self, mode: str) -> list[str]:
        q, k, v, o, sq, sk, d, dv = self.q, self.k, self.v, self.o, self.sq, self.sk, self.d, self.dv
        tma = mode == "_tma"
        causal = self.causal
        n_full = (f"(tl.minimum(start_m * BLOCK_M, {sk}) // BLOCK_N) * BLOCK_N" if causal
                  else f"({sk} // BLOCK_N) * BLOCK_N")
        n_end = f"tl.minimum((start_m + 1) * BLOCK_M, {sk})" if causal else str(sk)
        params = self.kernel.buffers()
        how = "TMA descriptor loads" if tma else "pointer loads"
        lines = [
            "@triton.jit",
            f"def {self.kernel.name}{mode}({', '.join(params)}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):",
            f'    """Flash attention{" (causal)" if causal else ""}, {how}: {math.prod(self.batch)} heads, {sq} '
            f'queries x {sk} keys, head dim {d}; one program = BLOCK_M queries of one head."""',
            "    start_m = tl.num_programs(0) - 1 - tl.program_id(0)  # longest (causal) query blocks first" if causal
            else "    start_m = tl.program_id(0)",
            "    off_b = tl.program_id(1)",
            "    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)",
            "    offs_n0 = tl.arange(0, BLOCK_N)",
            f"    offs_dv = tl.arange(0, {self.bdv})",
        ]
        if tma:  # one 2-D descriptor per operand over this head's (rows, head dim); edges read as zeros
            for name, t, rows, cols, blk in (("q", q, sq, d, "BLOCK_M"), ("k", k, sk, d, "BLOCK_N"),
                                             ("v", v, sk, dv, "BLOCK_N"), ("o", o, sq, dv, "BLOCK_M")):
                lines.append(f"    {name}_desc = tl.make_tensor_descriptor({self.base(t)}, shape=[{rows}, {cols}], "
                             f"strides=[{t.strides[-2]}, 1], block_shape=[{blk}, {cols}])")
            lines.append("    q = q_desc.load([start_m * BLOCK_M, 0])")
        else:
            lines += [f"    q_base = {self.base(q)}", f"    k_base = {self.base(k)}", f"    v_base = {self.base(v)}",
                      f"    o_base = {self.base(o)}", f"    offs_d = tl.arange(0, {self.bd})",
                      f"    q = tl.load(q_base + offs_m[:, None] * {q.strides[-2]} + offs_d[None, :] * "
                      f"{q.strides[-1]}, "
                      f"mask=(offs_m[:, None] < {sq}){self.dmask}, other=0.0)"]
        lines += [
            "    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float(\"inf\")",
            "    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)",
            f"    acc = tl.zeros([BLOCK_M, {self.bdv}], dtype=tl.float32)",
            f"    n_full = {n_full}",
            "    for start_n in range(0, n_full, BLOCK_N):  # wholly visible key blocks: no masks",
            *self.block(False, tma),
            f"    for start_n in range(n_full, {n_end}, BLOCK_N):  # diagonal / ragged key blocks",
            *self.block(True, tma),
            "    acc = acc * _rcp(l_i)[:, None]",
        ]
        if tma:
            lines.append(f"    o_desc.store([start_m * BLOCK_M, 0], acc.to({o.buffer}.dtype.element_ty))")
        else:
            lines.append(f"    tl.store(o_base + offs_m[:, None] * {o.strides[-2]} + offs_dv[None, :] * "
                         f"{o.strides[-1]}, "
                         f"acc.to({o.buffer}.dtype.element_ty), mask=(offs_m[:, None] < {sq}){self.dvmask})")
        return lines
