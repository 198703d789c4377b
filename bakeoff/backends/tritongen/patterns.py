"""Pattern matching on the source graph before expansion: the written-out attention pattern becomes an sdpa.

    matmul(softmax([causal_mask](matmul(q, transpose(k)) * c)), v)   ->   sdpa(q, k, v, causal, scale=c)

This is the form `workloads.decompose` gives an sdpa node, so a graph written with primitives fuses into the same
single flash-attention kernel (online softmax) as one written with `sdpa`. Accepted variations, each an exact
rewrite of the math:
- softmax as the composite op or written out as `exp(x - max(x)) / sum(exp(x - max(x)))` (decompose's form);
- the scale as `* c`, `c *` or `/ c` with a positive scalar constant c, or absent (c = 1), before or after the
  causal mask (a positive scale keeps -inf where the mask put it);
- k as `transpose(k)` swapping the last two axes, or any (..., D, Sk) operand (then a transpose view is made).
Not rewritten (fused as written instead): a value inside the pattern read elsewhere or returned; mixed dtypes
(casts); a non-scalar or non-positive scale; batch dims where q is broadcast against k or v.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from bakeoff.workloads.ir import Graph, Node


@dataclass(frozen=True)
class Attention:
    """An attention pattern ending at the matmul `root`: its q, v, k (`k_t`: k given as (..., D, Sk))."""

    root: int
    q: int
    k: int
    k_t: bool
    v: int
    causal: bool
    scale: float
    inner: frozenset[int]


def _swaps_last_two(perm: tuple[int, ...]) -> bool:
    r = len(perm)
    return r >= 2 and tuple(perm) == tuple(range(r - 2)) + (r - 1, r - 2)


def _scalar_const(g: Graph, nid: int) -> float | None:
    n = g.node(nid)
    if n.op != "const" or any(int(d) != 1 for d in n.shape):
        return None
    return float(n.attr("value"))


def _softmax_input(g: Graph, p: Node) -> tuple[int, set[int]] | None:
    """The input of a last-axis softmax at `p` and the nodes it consists of, or None."""
    if p.op == "softmax":
        return p.inputs[0], {p.id}
    if p.op != "div":
        return None
    e, s = (g.node(i) for i in p.inputs)
    if e.op != "exp" or s.op != "sum" or s.inputs[0] != e.id:
        return None
    d = g.node(e.inputs[0])
    if d.op != "sub":
        return None
    x, m = d.inputs
    if g.node(m).op != "max" or g.node(m).inputs[0] != x:
        return None
    return x, {p.id, e.id, s.id, d.id, m}


def _scores(g: Graph, x: int) -> tuple[int, bool, float, set[int]] | None:
    """Peel an optional causal mask and scale off the softmax input: (the q @ kT matmul, causal, scale, nodes)."""
    causal, scale, inner = False, None, set()
    for _ in range(2):
        n = g.node(x)
        if n.op == "causal_mask" and not causal:
            causal = True
        elif n.op in ("mul", "div") and scale is None:
            a, b = n.inputs
            c = _scalar_const(g, b)
            if c is not None:
                other = a
            elif n.op == "mul" and _scalar_const(g, a) is not None:
                c, other = _scalar_const(g, a), b
            else:
                break
            if not (math.isfinite(c) and c > 0) or tuple(n.shape) != tuple(g.node(other).shape):
                return None
            scale = c if n.op == "mul" else 1.0 / c
            inner.add(n.id)
            x = other
            continue
        else:
            break
        inner.add(n.id)
        x = n.inputs[0]
    if g.node(x).op != "matmul":
        return None
    inner.add(x)
    return x, causal, 1.0 if scale is None else scale, inner


def _shape(n: Node) -> tuple[int, ...]:
    return tuple(int(d) for d in n.shape)


def find_attention(g: Graph) -> dict[int, Attention]:
    """Every written-out attention pattern in bound graph `g`, by the id of its final matmul."""
    users, outputs = g.users(), set(g.outputs)
    found: dict[int, Attention] = {}
    for n in g.nodes:
        if n.op != "matmul":
            continue
        p_id, v_id = n.inputs
        sm = _softmax_input(g, g.node(p_id))
        if sm is None:
            continue
        x, inner = sm
        sc = _scores(g, x)
        if sc is None:
            continue
        qk_id, causal, scale, more = sc
        inner |= more
        q_id, kt_id = g.node(qk_id).inputs
        kt = g.node(kt_id)
        k_t = not (kt.op == "transpose" and _swaps_last_two(tuple(kt.attr("perm"))))
        k_id = kt_id if k_t else kt.inputs[0]
        q, k, v = g.node(q_id), g.node(k_id), g.node(v_id)
        qs, ks, vs = _shape(q), _shape(k), _shape(v)
        if k_t:
            ks = ks[:-2] + (ks[-1], ks[-2])
        # sdpa's shape rule, q carrying the full batch (k and v may broadcast into it, not q into them)
        if len(qs) < 2 or len(ks) < 2 or qs[-1] != ks[-1] or ks[-2] != vs[-2] \
                or _shape(n) != qs[:-1] + (vs[-1],) or _shape(g.node(qk_id)) != qs[:-1] + (ks[-2],):
            continue
        dtypes = {g.node(i).dtype for i in inner | {n.id, q_id, k_id, v_id}}
        if len(dtypes) != 1:
            continue
        # every intermediate value is used only inside the pattern and is not returned
        pattern = inner | {n.id}
        if any(i in outputs or not set(users[i]) <= pattern for i in inner):
            continue
        found[n.id] = Attention(n.id, q_id, k_id, k_t, v_id, causal, scale, frozenset(inner))
    return found
