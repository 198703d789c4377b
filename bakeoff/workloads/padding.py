"""Whether padding one dim of a graph (to a larger size, with zeros at the end) and slicing the outputs back
gives the unpadded graph's outputs exactly: the soundness rule behind serving a shape sweep by buckets.

Every axis of size `dim` is padded (the whole graph is bound at the bucket size). The rule follows the ops
of the unbound graph (`padding_refusal` returns None when sound, else the first node that breaks it):
- elementwise ops, broadcasts, transposes, and row-wise ops over other axes keep padded positions apart from
  real ones: sound;
- a reduction, normalisation or softmax over a padded last axis mixes padded positions into real results:
  unsound, unless the padded positions are masked for every real row (below);
- a matmul contracting a padded axis is unsound unless the padded positions of its left operand are zero for
  every real row;
- a causal mask over two padded axes (top-left aligned, as torch's and JAX's) sets -inf at every padded
  column of a real row; adding a per-row value keeps that, a softmax (or exp) over it makes the positions
  zero, a max over it ignores them, and a matmul contracting them adds nothing: sound;
- attention: padded queries are sound (each query row is independent); padded keys and values are sound
  only with a causal mask and the queries padded alike (no real query sees a padded key); a padded head dim
  (a contraction, and the scale) is not;
- a reshape is sound when each padded axis keeps its place in the row-major layout (the same product of dims
  before it); a dim that is a product holding `dim` (`S*H`) is not, since padding `S` interleaves rows.
The padded region's own values are never read by a real result under these rules (the numeric checks at
every served shape would show it if they were).
"""
from __future__ import annotations

from bakeoff.workloads.ir import Graph, Node, dim_product, norm_dim
from bakeoff.workloads.ops import kind

NEG_INF, ZERO = "-inf", "zero"  # facts: padded columns of every real row hold -inf / zero


def _padded(shape: tuple, dim: str) -> list[int]:
    return [i for i, d in enumerate(shape) if norm_dim(d) == dim]


def _inside_product(shape: tuple, dim: str) -> bool:
    return any(isinstance(norm_dim(d), str) and norm_dim(d) != dim and dim in norm_dim(d).split("*")
               for d in shape)


def _rows_masked(shape: tuple, dim: str) -> bool:
    return len(shape) >= 2 and norm_dim(shape[-2]) == dim and norm_dim(shape[-1]) == dim


def padding_refusal(graph: Graph, dim: str) -> str | None:
    """None when padding `dim` is sound for `graph` (unbound); else why not, naming the node."""
    facts: dict[int, str | None] = {}
    for n in graph.nodes:
        where = f"%{n.id} {n.op}" + (f" {n.attr('name')!r}" if n.op == "input" else "")
        if _inside_product(n.shape, dim):
            return f"{where} has an axis that is a product holding {dim}: padding {dim} would interleave its rows"
        reason, facts[n.id] = _rule(n, graph, dim, facts)
        if reason:
            return f"{where}: {reason}"
    return None


def _rule(n: Node, graph: Graph, dim: str, facts: dict[int, str | None]) -> tuple[str | None, str | None]:
    """(why unsound or None, the node's fact)."""
    k = kind(n.op)
    ins = [graph.node(i) for i in n.inputs]
    fact = facts.get(n.inputs[0]) if n.inputs else None
    last_padded = bool(ins) and bool(ins[0].shape) and norm_dim(ins[0].shape[-1]) == dim
    if k == "source":
        return None, None
    if n.op == "causal_mask":
        return None, NEG_INF if _rows_masked(n.shape, dim) else None
    if k == "unary":
        return None, ZERO if (n.op == "exp" and fact == NEG_INF) else None
    if k == "binary":
        return None, _binary_fact(n, ins, dim, facts)
    if k == "reduce":
        if not last_padded:
            return None, None
        if (n.op == "max" and fact == NEG_INF) or (n.op == "sum" and fact == ZERO):
            return None, None
        return f"{n.op} over the padded axis {dim} would include the padded positions", None
    if n.op == "matmul":
        if norm_dim(ins[0].shape[-1]) == dim and fact != ZERO:
            return f"matmul contracts the padded axis {dim}", None
        return None, None
    if n.op == "softmax":
        if last_padded and fact != NEG_INF:
            return f"softmax over the padded axis {dim} (no causal mask hides the padded positions)", None
        return None, ZERO if last_padded else None
    if n.op in ("layer_norm", "rms_norm"):
        if last_padded:
            return f"{n.op} normalises over the padded axis {dim}", None
        return None, None
    if n.op == "sdpa":
        return _sdpa_rule(n, ins, dim), None
    if n.op == "transpose":
        perm = tuple(n.attr("perm"))
        keeps = len(perm) >= 2 and perm[-2:] == (len(perm) - 2, len(perm) - 1)
        return None, fact if keeps else None
    if n.op == "broadcast":
        return None, None
    if n.op == "reshape":
        return _reshape_rule(ins[0].shape, n.shape, dim), None
    return f"no padding rule for {n.op}", None


def _binary_fact(n: Node, ins: list[Node], dim: str, facts: dict[int, str | None]) -> str | None:
    """-inf survives adding or subtracting a value that is the same across the padded columns (its last axis
    is not padded); zero survives multiplying or dividing by one."""
    for this, other in ((0, 1), (1, 0)):
        f, o = facts.get(n.inputs[this]), ins[other]
        if o.shape and norm_dim(o.shape[-1]) == dim:
            continue  # the other side varies across the padded columns
        if f == NEG_INF and (n.op == "add" or (n.op == "sub" and this == 0)):
            return NEG_INF
        if f == ZERO and (n.op == "mul" or (n.op == "div" and this == 0)):
            return ZERO
    return None


def _sdpa_rule(n: Node, ins: list[Node], dim: str) -> str | None:
    q, k, v = (x.shape for x in ins)
    if norm_dim(q[-1]) == dim or norm_dim(k[-1]) == dim:
        return f"attention's head dim is the padded {dim} (a contraction, and the scale)"
    if norm_dim(k[-2]) == dim or norm_dim(v[-2]) == dim:
        if not n.attr("causal"):
            return f"attention over padded keys {dim} without a causal mask: every query would attend to them"
        if norm_dim(q[-2]) != dim:
            return f"padded keys {dim} with queries of another length: the causal mask does not hide them"
    return None


def _reshape_rule(src: tuple, dst: tuple, dim: str) -> str | None:
    before = lambda shape, i: dim_product(shape[:i])  # noqa: E731
    a = [before(src, i) for i in _padded(src, dim)]
    b = [before(dst, j) for j in _padded(dst, dim)]
    if a != b:
        return f"reshape {list(src)} -> {list(dst)} moves the padded axis {dim} in the row-major layout"
    return None


def sliced_axes(graph: Graph, dim: str) -> list[list[int]]:
    """For each output, in order, the axes to cut back from the padded size."""
    return [_padded(n.shape, dim) for n in graph.output_nodes]
