"""Template: flash attention (sdpa node) with online softmax and fp32 accumulators, causal or not.

One program = BLOCK_M query rows of one (batch, head). Key blocks wholly visible run without masks; the
diagonal (causal) and ragged blocks run masked; causal programs start with the longest rows (a shorter tail).
Scores use exp2 with the softmax scale folded into log2(e) and into one FMA per score.
q, k, v and the output are read and written through their strides, so head split/merge layouts are free.
"""
from __future__ import annotations

import math

from bakeoff.workloads.decompose import sdpa_scale

from bakeoff.backends.tritongen.source import header, KernelSource, CodegenTarget
from bakeoff.backends.tritongen.indexing import linear_offset
from bakeoff.backends.tritongen.kernel_plan import Kernel, Plan
from bakeoff.backends.tritongen.views import broadcast_view

_LOG2E = 1.4426950408889634


def _pow2(x: int) -> int:
    return max(16, 1 << max(x - 1, 0).bit_length())


def generate(plan: Plan, kernel: Kernel, target: CodegenTarget) -> KernelSource:
    g = plan.graph
    node = g.node(kernel.anchor)
    loads = dict(kernel.loads)
    out_shape = tuple(int(d) for d in node.shape)
    batch = out_shape[:-2]
    sq, dv = out_shape[-2:]
    qn, kn, vn = (g.node(i) for i in node.inputs)
    d = int(qn.shape[-1])
    sk = int(kn.shape[-2])
    q = broadcast_view(loads[qn.id], batch + (sq, d))
    k = broadcast_view(loads[kn.id], batch + (sk, d))
    v = broadcast_view(loads[vn.id], batch + (sk, dv))
    o = dict(kernel.stores)[node.id]
    causal = bool(node.attr("causal"))
    scale = sdpa_scale(node, d) * _LOG2E
    bd, bdv = _pow2(d), _pow2(dv)
    dmask = "" if bd == d else f" & (offs_d[None, :] < {d})"
    dvmask = "" if bdv == dv else f" & (offs_dv[None, :] < {dv})"
    base = {t.buffer + name: f"{t.buffer} + {linear_offset('off_b', batch, t.strides[:-2])} + {t.offset}"
            for name, t in (("q", q), ("k", k), ("v", v), ("o", o))}
    op_q, op_k, op_v = (target.dot_operand(x) for x in ("q", "tl.trans(kt)", "vt"))
    p_cast = target.dot_operand("p.to(vt.dtype)")

    def block(masked: bool) -> list[str]:
        ind = "        "
        kmask = f"(offs_n[:, None] < {sk}){dmask}" if masked else (dmask[3:] if dmask else "")
        vmask = f"(offs_n[:, None] < {sk}){dvmask}" if masked else (dvmask[3:] if dvmask else "")
        km = f", mask={kmask}, other=0.0" if kmask else ""
        vm = f", mask={vmask}, other=0.0" if vmask else ""
        out = [f"{ind}offs_n = start_n + offs_n0",
               f"{ind}kt = tl.load(k_base + offs_n[:, None] * {k.strides[-2]} + offs_d[None, :] * {k.strides[-1]}{km})",
               f"{ind}qk = tl.dot({op_q}, {op_k}{target.dot_kwargs})"]
        if masked:
            valid = f"(offs_n[None, :] < {sk})" + (" & (offs_n[None, :] <= offs_m[:, None])" if causal else "")
            out.append(f'{ind}qk = tl.where({valid}, qk, -float("inf"))')
        out += [f"{ind}m_new = tl.maximum(m_i, tl.max(qk, 1) * {scale!r})  # running max, in log2 units",
                f"{ind}p = _exp2(qk * {scale!r} - m_new[:, None])  # scale folded into one FMA",
                f"{ind}alpha = _exp2(m_i - m_new)",
                f"{ind}l_i = l_i * alpha + tl.sum(p, 1)",
                f"{ind}acc = acc * alpha[:, None]",
                f"{ind}vt = tl.load(v_base + offs_n[:, None] * {v.strides[-2]} + offs_dv[None, :] * {v.strides[-1]}{vm})",
                f"{ind}acc = tl.dot({p_cast}, {op_v}, acc{target.dot_kwargs})",
                f"{ind}m_i = m_new"]
        return out

    n_full = (f"(tl.minimum(start_m * BLOCK_M, {sk}) // BLOCK_N) * BLOCK_N" if causal
              else f"({sk} // BLOCK_N) * BLOCK_N")
    n_end = f"tl.minimum((start_m + 1) * BLOCK_M, {sk})" if causal else str(sk)
    params = kernel.buffers()
    lines = [
        "@triton.jit",
        f"def {kernel.name}({', '.join(params)}, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):",
        f'    """Flash attention{" (causal)" if causal else ""}: {math.prod(batch)} heads, {sq} queries x {sk} keys, '
        f'head dim {d}; one program = BLOCK_M queries of one head."""',
        "    start_m = tl.num_programs(0) - 1 - tl.program_id(0)  # longest (causal) query blocks first" if causal
        else "    start_m = tl.program_id(0)",
        "    off_b = tl.program_id(1)",
        f"    q_base = {base[q.buffer + 'q']}",
        f"    k_base = {base[k.buffer + 'k']}",
        f"    v_base = {base[v.buffer + 'v']}",
        f"    o_base = {base[o.buffer + 'o']}",
        "    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    offs_n0 = tl.arange(0, BLOCK_N)",
        f"    offs_d = tl.arange(0, {bd})",
        f"    offs_dv = tl.arange(0, {bdv})",
        f"    q = tl.load(q_base + offs_m[:, None] * {q.strides[-2]} + offs_d[None, :] * {q.strides[-1]}, "
        f"mask=(offs_m[:, None] < {sq}){dmask}, other=0.0)",
        "    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float(\"inf\")",
        "    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)",
        f"    acc = tl.zeros([BLOCK_M, {bdv}], dtype=tl.float32)",
        f"    n_full = {n_full}",
        "    for start_n in range(0, n_full, BLOCK_N):  # wholly visible key blocks: no masks",
        *block(False),
        f"    for start_n in range(n_full, {n_end}, BLOCK_N):  # diagonal / ragged key blocks",
        *block(True),
        "    acc = acc / l_i[:, None]",
        f"    tl.store(o_base + offs_m[:, None] * {o.strides[-2]} + offs_dv[None, :] * {o.strides[-1]}, "
        f"acc.to({o.buffer}.dtype.element_ty), mask=(offs_m[:, None] < {sq}){dvmask})",
    ]
    text = header(f"attention kernel {kernel.name}", target) + "\n".join(lines) + "\n"
    return KernelSource(kernel, kernel.name, text, params, {"sq": sq, "sk": sk, "heads": math.prod(batch),
                                                            "d": d})
