"""The op set: names, arity and shape inference. Lowerings implement these ops; nothing else.

Kinds:
- ``unary`` / ``binary``: elementwise, NumPy broadcasting for binary ops;
- ``reduce``: over the last axis, keeping it as size 1 (``var`` is the population variance);
- ``matmul``: batched, ``(..., M, K) @ (..., K, N)`` with broadcast batch dims;
- ``layout``: reshape, transpose, broadcast;
- ``composite``: layer_norm, rms_norm, softmax, sdpa; each has a decomposition (`workloads.decompose`).
"""
from __future__ import annotations

from typing import Any

from bakeoff.workloads.ir import Dim, IRError, Shape, dim_product, norm_dim

UNARY = ("neg", "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "relu", "gelu", "silu", "pow", "cast",
         "causal_mask")
BINARY = ("add", "sub", "mul", "div", "maximum")
REDUCE = ("sum", "mean", "max", "var")
LAYOUT = ("reshape", "transpose", "broadcast")
COMPOSITE = ("layer_norm", "rms_norm", "softmax", "sdpa")
SOURCES = ("input", "const")
ALL_OPS = SOURCES + UNARY + BINARY + REDUCE + ("matmul",) + LAYOUT + COMPOSITE

# Arity of each callable op as written in expressions (inputs only; attributes are keywords).
ARITY = {**{op: 1 for op in UNARY}, **{op: 2 for op in BINARY}, **{op: 1 for op in REDUCE},
         "matmul": 2, "reshape": 1, "transpose": 1, "broadcast": 1,
         "layer_norm": (1, 3), "rms_norm": (1, 2), "softmax": 1, "sdpa": 3}

# Attributes each op accepts, with defaults (None = required).
ATTRS: dict[str, dict[str, Any]] = {
    "gelu": {"approximate": "none"},
    "pow": {"exponent": None},
    "cast": {"dtype": None},
    "reshape": {"shape": None},
    "transpose": {"perm": None},
    "broadcast": {"shape": None},
    "var": {"correction": 0},
    "layer_norm": {"eps": 1e-5},
    "rms_norm": {"eps": 1e-6},
    "sdpa": {"causal": False, "scale": None},
    "const": {"value": None},
    "input": {"name": None, "init": ("normal", 1.0)},
}


def kind(op: str) -> str:
    for name, group in (("source", SOURCES), ("unary", UNARY), ("binary", BINARY), ("reduce", REDUCE),
                        ("layout", LAYOUT), ("composite", COMPOSITE)):
        if op in group:
            return name
    if op == "matmul":
        return "matmul"
    raise IRError(f"unknown op {op!r}; known ops: {', '.join(ALL_OPS)}")


def _same(a: Dim, b: Dim) -> bool:
    return norm_dim(a) == norm_dim(b)


def broadcast_shapes(a: Shape, b: Shape) -> Shape:
    """NumPy broadcasting on (possibly symbolic) shapes."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if _same(x, y) or y == 1:
            out.append(norm_dim(x))
        elif x == 1:
            out.append(norm_dim(y))
        else:
            raise IRError(f"shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(reversed(out))


def infer_shape(op: str, shapes: list[Shape], attrs: dict[str, Any]) -> Shape:
    """The output shape of `op` given its input shapes; raises IRError with the reason."""
    k = kind(op)
    if k == "unary":
        return shapes[0]
    if k == "binary":
        return broadcast_shapes(shapes[0], shapes[1])
    if k == "reduce":
        if not shapes[0]:
            raise IRError(f"{op} needs at least one axis")
        return shapes[0][:-1] + (1,)
    if op == "matmul":
        a, b = shapes
        if len(a) < 2 or len(b) < 2:
            raise IRError(f"matmul needs operands of rank >= 2, got {list(a)} @ {list(b)}")
        if not _same(a[-1], b[-2]):
            raise IRError(f"matmul inner dims differ: {list(a)} @ {list(b)}")
        return broadcast_shapes(a[:-2], b[:-2]) + (norm_dim(a[-2]), norm_dim(b[-1]))
    if op == "reshape":
        new = tuple(norm_dim(d) for d in attrs["shape"])
        if dim_product(new) != dim_product(shapes[0]):
            raise IRError(f"reshape from {list(shapes[0])} to {list(new)} changes the element count")
        return new
    if op == "transpose":
        perm = tuple(attrs["perm"])
        if sorted(perm) != list(range(len(shapes[0]))):
            raise IRError(f"transpose perm {list(perm)} is not a permutation of rank {len(shapes[0])}")
        return tuple(shapes[0][p] for p in perm)
    if op == "broadcast":
        new = tuple(norm_dim(d) for d in attrs["shape"])
        if broadcast_shapes(shapes[0], new) != new:
            raise IRError(f"cannot broadcast {list(shapes[0])} to {list(new)}")
        return new
    if op in ("layer_norm", "rms_norm"):
        for s in shapes[1:]:
            if len(s) != 1 or not _same(s[0], shapes[0][-1]):
                raise IRError(f"{op} weight/bias must have shape [{shapes[0][-1]}], got {list(s)}")
        return shapes[0]
    if op == "softmax":
        return shapes[0]
    if op == "sdpa":
        q, k_, v = shapes
        if len(q) < 2 or not (_same(q[-1], k_[-1]) and _same(k_[-2], v[-2])):
            raise IRError(f"sdpa shapes do not match: q {list(q)}, k {list(k_)}, v {list(v)}")
        return q[:-1] + (norm_dim(v[-1]),)
    raise IRError(f"no shape rule for {op!r}")
