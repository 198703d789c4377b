"""StableHLO of a graph with one dim left symbolic (`?` in the tensor types), through `jax.export`'s symbolic
shapes: one module that serves every value of a shape sweep (IREE compiles it once).

The mirror of `lower_torch_dynamic`: every other dim is bound; the swept dim is a JAX symbolic dimension
(`jax.export.symbolic_shape`), and the ops whose lowering needs a size (reshape, broadcast) get it as an
expression of that dimension; every other op lowers as in `lower_jax` (the causal mask and the reductions read
their sizes from the traced arrays, symbolic or not). Attention is decomposed, as `stablehlo_text` has it
(IREE's route). Refused (`LowerError`, with the reason): an attention whose head dim is swept (its scale must be
a number), a swept dim no input has as an axis, and whatever JAX's shape polymorphism itself refuses
(its message is the reason).

Two things keep the module inside what iree-compile's StableHLO input takes:
- matmuls are `lax.dot_general` with the leading dims as batch dims, not `jnp.matmul`, which squeezes and
  flattens leading dims with reshapes that become `stablehlo.dynamic_reshape` under a symbolic dim (IREE 3.13
  does not legalize it; a graph whose own reshape needs one is refused by iree-compile, and the adapter
  records that as the reason);
- every `stablehlo.dynamic_broadcast_in_dim` whose operand axis is `?` and maps to a `?` result axis is marked
  `known_nonexpanding_dimensions` (`mark_nonexpanding`): IREE refuses the op otherwise, since a `?` could be
  a 1 that expands. Sound here: JAX writes a `?` only for an axis that holds the symbolic dim, and broadcasting
  never stretches such an axis (an axis JAX broadcasts from has the static size 1).
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from bakeoff.workloads.decompose import sdpa_scale
from bakeoff.workloads.ir import Graph, bind
from bakeoff.workloads.lower_jax import _causal_mask, _eval, _upcast, jax_dtype, sdpa_routes, share_gpu_with_torch
from bakeoff.workloads.lower_torch_dynamic import LowerError, _dim, _holds


def _symbolic_specs(graph: Graph, dim: str, other: Mapping[str, int], bound: Graph) -> list:
    """One jax.ShapeDtypeStruct per input: the swept dim (and products holding it) symbolic, the rest ints."""
    import jax

    (sym,) = jax.export.symbolic_shape(dim)
    specs, seen = [], False
    for n, b in zip(graph.inputs, bound.inputs):
        shape = []
        for d in n.shape:
            if _holds(d, dim):
                shape.append(_dim(d, dim, sym, other))
                seen = True
            else:
                shape.append(int(_dim(d, dim, 0, other)))
        specs.append(jax.ShapeDtypeStruct(tuple(shape), jax_dtype(b.dtype)))
    if not seen:
        raise LowerError(f"no input has an axis of size {dim}: its value cannot be read at run time")
    return specs, sym


def _dot(a: Any, b: Any) -> Any:
    """`lower_jax._matmul`'s numerics through one dot_general: a (..., m, k) @ b (k, n) contracts with no batch
    dims; equal ranks batch over the leading dims (broadcast to a common shape first)."""
    import jax
    import jax.numpy as jnp

    if a.ndim == 2 and b.ndim == 2:
        dims = (((1,), (0,)), ((), ()))
    else:  # a 2-D weight too is broadcast over the leading dims: JAX flattens them with a reshape otherwise
        lead = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a, b = jnp.broadcast_to(a, (*lead, *a.shape[-2:])), jnp.broadcast_to(b, (*lead, *b.shape[-2:]))
        batch = tuple(range(len(lead)))
        dims = (((a.ndim - 1,), (b.ndim - 2,)), (batch, batch))
    if a.dtype in (jnp.float16, jnp.bfloat16):
        return jax.lax.dot_general(a, b, dims, preferred_element_type=jnp.float32).astype(a.dtype)
    return jax.lax.dot_general(a, b, dims, precision=jax.lax.Precision.HIGHEST)


def _sdpa(b: Any, a: list, bound: Graph) -> Any:
    """Decomposed attention (`lower_jax._sdpa`) on `_dot`."""
    import jax.numpy as jnp

    q, k, v = a
    s = _dot(q, jnp.swapaxes(k, -1, -2)) * sdpa_scale(b, bound.node(b.inputs[0]).shape[-1])
    if b.attr("causal"):
        s = _causal_mask(s)
    return _dot(_softmax(s), v)


def _softmax(x: Any) -> Any:
    """`lower_jax._softmax` with each row statistic broadcast back by one broadcast_in_dim: the keepdims form
    gives two broadcasts that iree-compile's canonicalizer merges, dropping `known_nonexpanding_dimensions`."""
    import jax
    import jax.numpy as jnp

    xf = _upcast(x)
    rows = tuple(range(xf.ndim - 1))
    e = jnp.exp(xf - jax.lax.broadcast_in_dim(jnp.max(xf, axis=-1), xf.shape, rows))
    return (e / jax.lax.broadcast_in_dim(jnp.sum(e, axis=-1), xf.shape, rows)).astype(x.dtype)


_DYN_BROADCAST = re.compile(r"(stablehlo\.dynamic_broadcast_in_dim [^,\n]+, [^,\n]+, dims = \[([0-9, ]*)\])"
                            r"( : \(tensor<([^>]*)>, [^)]*\) -> tensor<([^>]*)>)")


def mark_nonexpanding(text: str) -> str:
    """`text` with `known_nonexpanding_dimensions` on each dynamic_broadcast_in_dim's `?`-to-`?` axes (module
    docstring: why it is sound)."""
    def mark(m: re.Match) -> str:
        dims = [int(x) for x in m.group(2).split(",") if x.strip()]
        operand, result = m.group(4).split("x")[:-1], m.group(5).split("x")[:-1]
        axes = [i for i, d in enumerate(dims) if operand[i] == "?" and result[d] == "?"]
        if not axes:
            return m.group(0)
        return f"{m.group(1)} {{known_nonexpanding_dimensions = array<i64: {', '.join(map(str, axes))}>}}{m.group(3)}"
    return _DYN_BROADCAST.sub(mark, text)


def symbolic_stablehlo(graph: Graph, dim: str, other: Mapping[str, int], dtype: str,
                       platform: str | None = None) -> str:
    """The StableHLO (MLIR text, entry `main`) of `graph` (unbound) with `dim` symbolic and every dim in `other`
    bound, computing in `dtype`, for `platform` ("cpu", "cuda"). Raises LowerError with the reason."""
    share_gpu_with_torch()
    import jax

    probe = {**other, dim: 2}   # a binding only to read dtypes, attributes and the other dims from
    bound = bind(graph, probe, dtype)
    for n in graph.nodes:
        if n.op == "sdpa" and _holds(graph.node(n.inputs[0]).shape[-1], dim) and n.attr("scale") is None:
            raise LowerError(f"attention's head dim is the swept dim {dim}: its scale 1/sqrt({dim}) must be a "
                             "number when the graph is built")
    specs, sym = _symbolic_specs(graph, dim, other, bound)
    routes = sdpa_routes(bound, "decomposed", platform)
    input_ids = [n.id for n in graph.inputs]

    def run(*arrays: Any) -> tuple:
        env: dict[int, Any] = dict(zip(input_ids, arrays))
        for n, b in zip(graph.nodes, bound.nodes):
            if n.op == "input":
                continue
            a = [env[i] for i in n.inputs]
            if n.op == "const":
                env[n.id] = n.attr("value")
            elif n.op == "matmul":
                env[n.id] = _dot(a[0], a[1])
            elif n.op == "sdpa":
                env[n.id] = _sdpa(b, a, bound)
            elif n.op == "softmax":
                env[n.id] = _softmax(a[0])
            elif n.op in ("reshape", "broadcast"):
                shape = tuple(_dim(d, dim, sym, other) for d in n.attr("shape"))
                env[n.id] = a[0].reshape(shape) if n.op == "reshape" else jax.numpy.broadcast_to(a[0], shape)
            else:
                env[n.id] = _eval(b, a, bound, routes)
        return tuple(env[i] for i in graph.outputs)

    run.__name__ = f"bakeoff_{graph.name}_dyn_{dim}"
    try:
        exported = jax.export.export(jax.jit(run), platforms=[platform or jax.default_backend()])(*specs)
    except LowerError:
        raise
    except Exception as exc:  # noqa: BLE001 - JAX's shape polymorphism refused an op: its words are the reason
        raise LowerError(f"jax.export with {dim} symbolic failed: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:300]}") from exc
    text = mark_nonexpanding(exported.mlir_module())
    if "?" not in text:
        raise LowerError(f"the export holds no dynamic dim ({dim} was folded to a constant)")
    return text

