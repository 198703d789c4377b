"""Lower a bound graph to a pure JAX function, and print it as StableHLO.

The mirror of `lower_torch`: one JAX (jax.numpy / jax.lax) expression per op, composites written out with
the numerics PyTorch's native kernels use (statistics of 16-bit inputs computed in float32, softmax shifted
by its row max). JAX is imported inside the functions only, so this module imports without JAX installed.

Attention (`sdpa`) has two routes, chosen by `attention`: "native" calls `jax.nn.dot_product_attention`, what
a JAX user would write: on a GPU in float16/bfloat16 with a head dim that is a multiple of 8 and at most 128,
`implementation="cudnn"` (cuDNN's fused flash attention, a `__cudnn$fmha` custom call in the HLO), else
JAX's own XLA implementation; "decomposed" writes it out as matmul, scale, causal mask, softmax, matmul (what
IREE gets: a cuDNN custom call cannot lower in IREE, and StableHLO has no fused attention op). Layer norm,
RMS norm and softmax have no native JAX op and are written out either way. `lowering_paths` says in words
which route each composite of a graph takes.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from bakeoff.workloads.decompose import sdpa_scale
from bakeoff.workloads.grad import grad_inputs
from bakeoff.workloads.ir import Graph, Node
from bakeoff.workloads.routes import routes_by_op

# 16-bit floats whose reductions PyTorch accumulates in float32; we do the same so errors compare fairly.
_HALF = ("float16", "bfloat16")


def share_gpu_with_torch() -> None:
    """Stop JAX from grabbing 75% of GPU memory when its GPU client starts: torch shares the GPU here.

    XLA reads the variable when the client starts (first use, not import); a value set by the user wins.
    """
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def jax_dtype(name: str) -> Any:
    """The jax.numpy dtype of an IR dtype name (float64 needs jax_enable_x64)."""
    import jax.numpy as jnp

    return {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16,
            "float64": jnp.float64}[name]


def _upcast(x: Any) -> Any:
    """x in float32 if it is a 16-bit float, else unchanged (the accumulation dtype PyTorch uses)."""
    import jax.numpy as jnp

    return x.astype(jnp.float32) if x.dtype in (jnp.float16, jnp.bfloat16) else x


def _matmul(a: Any, b: Any) -> Any:
    """Batched matmul: float32 at full precision, 16-bit floats accumulated in float32 then rounded.

    JAX's default precision lets XLA use TF32 for float32 on Ampere and later GPUs; PyTorch's matmul does
    not by default, and TF32 would blow the float32 error budget, so float32 asks for HIGHEST. For 16-bit
    inputs the explicit float32 accumulator is what cuBLAS does for PyTorch; it also keeps IREE 3.13's CUDA
    codegen working (a bf16-accumulating dot_general fails there with "failed to distribute").
    """
    import jax
    import jax.numpy as jnp

    if a.dtype in (jnp.float16, jnp.bfloat16):
        return jnp.matmul(a, b, preferred_element_type=jnp.float32).astype(a.dtype)
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def _causal_mask(x: Any) -> Any:
    """-inf where column j > row i over the last two axes (top-left aligned, as torch's is_causal)."""
    import jax.numpy as jnp

    import jax

    shape = (x.shape[-2], x.shape[-1])
    # iota, not jnp.arange: stays in the traced program instead of becoming a device constant.
    masked = jax.lax.broadcasted_iota(jnp.int32, shape, 1) > jax.lax.broadcasted_iota(jnp.int32, shape, 0)
    return jnp.where(masked, jnp.asarray(-jnp.inf, x.dtype), x)


def _softmax(x: Any) -> Any:
    """Softmax over the last axis, shifted by the row max so exp never overflows; float32 inside for 16-bit."""
    import jax.numpy as jnp

    xf = _upcast(x)
    e = jnp.exp(xf - jnp.max(xf, axis=-1, keepdims=True))
    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)


def _layer_norm(x: Any, w: Any, b: Any, eps: float) -> Any:
    """(x - mean) / sqrt(var + eps) * w + b over the last axis; statistics in float32 for 16-bit x."""
    import jax
    import jax.numpy as jnp

    xf = _upcast(x)
    mean = jnp.mean(xf, axis=-1, keepdims=True)
    xc = xf - mean
    y = xc * jax.lax.rsqrt(jnp.mean(xc * xc, axis=-1, keepdims=True) + eps)
    if w is not None:
        y = y * _upcast(w)
    if b is not None:
        y = y + _upcast(b)
    return y.astype(x.dtype)


def _rms_norm(x: Any, w: Any, eps: float) -> Any:
    """x / sqrt(mean(x^2) + eps) * w over the last axis; float32 inside for 16-bit x."""
    import jax
    import jax.numpy as jnp

    xf = _upcast(x)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    if w is not None:
        y = y * _upcast(w)
    return y.astype(x.dtype)


def _sdpa(q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    """softmax(q @ k^T * scale [causal]) @ v, batched over leading axes."""
    import jax.numpy as jnp

    s = _matmul(q, jnp.swapaxes(k, -1, -2)) * scale
    if causal:
        s = _causal_mask(s)
    return _matmul(_softmax(s), v)


def _sdpa_outlined(q: Any, k: Any, v: Any, scale: float, causal: bool) -> Any:
    """`_sdpa` as its own function in the StableHLO (`func.func private @bakeoff_sdpa...`, called from `main`):
    XLA and IREE inline it; IREE's fused attention route (backends/iree_attention.py) replaces its body."""
    import jax

    def bakeoff_sdpa(q: Any, k: Any, v: Any) -> Any:
        return _sdpa(q, k, v, scale, causal)

    return jax.jit(bakeoff_sdpa)(q, k, v)


ATTENTION_ROUTES = ("native", "decomposed")
_CUDNN_MAX_HEAD_DIM = 128


def sdpa_route(n: Node, graph: Graph, attention: str, platform: str | None, cudnn: bool = True) -> tuple[str, str]:
    """(route, words) of sdpa node `n`: route "cudnn" or "xla" (jax.nn.dot_product_attention with that
    implementation; "xla" is implementation=None) or "decomposed"; the words say why."""
    if attention not in ATTENTION_ROUTES:
        raise ValueError(f"attention must be one of {list(ATTENTION_ROUTES)}, got {attention!r}")
    if attention == "decomposed":
        return "decomposed", "decomposed (matmul, scale, mask, softmax, matmul): option attention=decomposed"
    q, k, v = (graph.node(i) for i in n.inputs)
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]) or v.shape[-1] != q.shape[-1]:
        return "decomposed", ("decomposed: jax.nn.dot_product_attention needs q, k, v with the same leading dims "
                              "and head dim")
    head = int(q.shape[-1])
    call = "native: jax.nn.dot_product_attention"
    if platform not in ("cuda", "gpu"):
        if n.dtype == "float16":  # checked with jax 0.10.2 on the CPU: "not supported by dot_general on CPU"
            return "decomposed", ("decomposed: jax.nn.dot_product_attention asks for F16_F16_F32 matmuls, which "
                                  "XLA's CPU backend rejects")
        return "xla", f"{call}(implementation=None), JAX's XLA path (cuDNN runs on a GPU only)"
    if n.dtype not in _HALF:
        return "xla", f"{call}(implementation=None), JAX's XLA path: cuDNN fused attention takes float16/bfloat16"
    if head % 8 or head > _CUDNN_MAX_HEAD_DIM:
        return "xla", (f"{call}(implementation=None), JAX's XLA path: cuDNN fused attention needs a head dim that "
                       f"is a multiple of 8 and at most {_CUDNN_MAX_HEAD_DIM}, got {head}")
    if not cudnn:
        return "xla", f"{call}(implementation=None), JAX's XLA path: the cuDNN build failed (compile notes)"
    return "cudnn", f"{call}(implementation='cudnn'), cuDNN fused attention"


def _sdpa_native(q: Any, k: Any, v: Any, scale: float, causal: bool, route: str) -> Any:
    """jax.nn.dot_product_attention on (..., L, E) inputs: leading dims become (batch, heads) in JAX's BTNH
    layout and back. float32 asks for full-precision matmuls (JAX's default would allow TF32 on a GPU)."""
    import math

    import jax
    import jax.numpy as jnp

    lead = q.shape[:-2]
    b, heads = (1, 1) if not lead else ((lead[0], 1) if len(lead) == 1 else (math.prod(lead[:-1]), lead[-1]))

    def btnh(x: Any) -> Any:
        return jnp.swapaxes(x.reshape(b, heads, x.shape[-2], x.shape[-1]), 1, 2)

    impl = "cudnn" if route == "cudnn" else None
    precision = "highest" if q.dtype == jnp.float32 else None
    with jax.default_matmul_precision(precision):
        out = jax.nn.dot_product_attention(btnh(q), btnh(k), btnh(v), scale=scale, is_causal=causal,
                                           implementation=impl)
    return jnp.swapaxes(out, 1, 2).reshape(*lead, q.shape[-2], v.shape[-1])


def sdpa_routes(graph: Graph, attention: str, platform: str | None, cudnn: bool = True) -> dict[int, str]:
    """The route of every sdpa node of `graph` by node id ("cudnn", "xla" or "decomposed")."""
    return {n.id: sdpa_route(n, graph, attention, platform, cudnn)[0] for n in graph.nodes if n.op == "sdpa"}


_WRITTEN_OUT = {
    "layer_norm": "jnp: float32 statistics for 16-bit inputs (JAX has no layer-norm op)",
    "rms_norm": "jnp: float32 statistics for 16-bit inputs (JAX has no RMS-norm op)",
    "softmax": "jnp: max-shifted exp, float32 inside for 16-bit inputs (jax.nn.softmax would sum in 16 bits)",
}


def lowering_paths(graph: Graph, attention: str = "decomposed", platform: str | None = None,
                   cudnn: bool = True) -> dict[str, str]:
    """Which route each composite op of `graph` takes in `lower_jax` with these arguments, in words; {} when
    the graph has none. Several sdpa nodes on different routes are joined with '; '."""
    return routes_by_op(graph, lambda n: sdpa_route(n, graph, attention, platform, cudnn)[1] if n.op == "sdpa"
                        else _WRITTEN_OUT.get(n.op))


def _pow(x: Any, exponent: float) -> Any:
    """x ** exponent; integer exponents as repeated multiplication, exact for negative x as in PyTorch."""
    import jax
    import jax.numpy as jnp

    if float(exponent).is_integer():
        return jax.lax.integer_pow(x, int(exponent))
    return jnp.power(x, jnp.asarray(exponent, x.dtype))


def _eval(n: Node, a: list, graph: Graph, routes: dict[int, str]) -> Any:
    import jax
    import jax.numpy as jnp

    op = n.op
    unary: dict[str, Callable] = {
        "neg": jnp.negative, "exp": jnp.exp, "log": jnp.log, "sqrt": jnp.sqrt, "rsqrt": jax.lax.rsqrt,
        "tanh": jnp.tanh, "erf": jax.lax.erf, "sigmoid": jax.nn.sigmoid, "relu": jax.nn.relu,
        "silu": jax.nn.silu, "causal_mask": _causal_mask,
    }
    binary: dict[str, Callable] = {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply,
                                   "div": jnp.divide, "maximum": jnp.maximum, "matmul": _matmul}
    if op in unary:
        return unary[op](a[0])
    if op in binary:
        return binary[op](a[0], a[1])
    if op == "gelu":
        return jax.nn.gelu(a[0], approximate=n.attr("approximate") == "tanh")
    if op == "pow":
        return _pow(a[0], n.attr("exponent"))
    if op == "cast":
        return a[0].astype(jax_dtype(n.attr("dtype")))
    if op == "sum":
        return jnp.sum(a[0], axis=-1, keepdims=True)
    if op == "mean":
        return jnp.mean(a[0], axis=-1, keepdims=True)
    if op == "max":
        return jnp.max(a[0], axis=-1, keepdims=True)
    if op == "var":
        return jnp.var(a[0], axis=-1, keepdims=True, ddof=n.attr("correction"))
    if op == "reshape":
        return jnp.reshape(a[0], n.attr("shape"))
    if op == "transpose":
        return jnp.transpose(a[0], n.attr("perm"))
    if op == "broadcast":
        return jnp.broadcast_to(a[0], n.attr("shape"))
    if op == "layer_norm":
        w, b = (a + [None, None])[1:3]
        return _layer_norm(a[0], w, b, n.attr("eps"))
    if op == "rms_norm":
        return _rms_norm(a[0], a[1] if len(a) > 1 else None, n.attr("eps"))
    if op == "softmax":
        return _softmax(a[0])
    if op == "sdpa":
        q = graph.node(n.inputs[0])
        scale, causal = sdpa_scale(n, q.shape[-1]), bool(n.attr("causal"))
        if routes[n.id] == "decomposed":
            return _sdpa_outlined(a[0], a[1], a[2], scale, causal)
        return _sdpa_native(a[0], a[1], a[2], scale, causal, routes[n.id])
    raise NotImplementedError(f"no JAX lowering for op {op!r}")


def lower_jax(graph: Graph, attention: str = "decomposed", platform: str | None = None,
              cudnn: bool = True) -> Callable[..., tuple]:
    """A pure function of the graph's inputs (jax arrays, in graph order) returning its outputs as a tuple.

    `attention` ("native" or "decomposed") and `platform` ("cpu", "cuda") pick each sdpa's route
    (`sdpa_route`); `cudnn=False` keeps native attention off cuDNN (after a failed cuDNN build).
    Constants stay Python floats: JAX treats them as weakly typed, so they take the tensor's dtype.
    """
    if not graph.is_bound():
        raise ValueError("lower_jax needs a bound graph (workloads.ir.bind)")
    input_ids = [n.id for n in graph.inputs]
    nodes = [n for n in graph.nodes if n.op != "input"]
    routes = sdpa_routes(graph, attention, platform, cudnn)

    def run(*arrays: Any) -> tuple:
        env: dict[int, Any] = dict(zip(input_ids, arrays))
        for n in nodes:
            env[n.id] = (n.attr("value") if n.op == "const"
                         else _eval(n, [env[i] for i in n.inputs], graph, routes))
        return tuple(env[i] for i in graph.outputs)

    run.__name__ = f"bakeoff_{graph.name}"
    return run


def lower_jax_grad(graph: Graph, attention: str = "decomposed", platform: str | None = None,
                   cudnn: bool = True) -> Callable[..., tuple]:
    """The training step of `lower_jax(graph, ...)` (workloads/grad.py): a pure function of (inputs...,
    cotangents...) returning (outputs..., gradients...) through `jax.vjp`; jit it as the forward."""
    import jax

    forward = lower_jax(graph, attention, platform, cudnn)
    n_inputs = len(graph.inputs)
    names = {n.attr("name") for n in grad_inputs(graph)}
    wrt = [i for i, n in enumerate(graph.inputs) if n.attr("name") in names]

    def step(*arrays: Any) -> tuple:
        xs, cts = list(arrays[:n_inputs]), tuple(arrays[n_inputs:])

        def of_wrt(*diff: Any) -> tuple:
            args = list(xs)
            for i, x in zip(wrt, diff):
                args[i] = x
            return forward(*args)

        outs, vjp = jax.vjp(of_wrt, *[xs[i] for i in wrt])
        return (*outs, *vjp(cts))

    step.__name__ = f"bakeoff_{graph.name}_step"
    return step


def input_specs(graph: Graph, sharding: Any = None, grad: bool = False) -> list:
    """One jax.ShapeDtypeStruct per graph input (then, for a training step, per cotangent: each output's
    shape and dtype); `sharding` (e.g. a SingleDeviceSharding) pins the device."""
    import jax

    nodes = list(graph.inputs) + (list(graph.output_nodes) if grad else [])
    return [jax.ShapeDtypeStruct(tuple(int(d) for d in n.shape), jax_dtype(n.dtype), sharding=sharding)
            for n in nodes]


def stablehlo_text(graph: Graph, platform: str | None = None, grad: bool = False) -> str:
    """The StableHLO (MLIR text) of `lower_jax(graph)` under jax.jit, entry function `main`.

    Lowered from device-less ShapeDtypeStructs: arguments that carry a device (e.g. arrays imported by
    DLPack) make JAX emit Shardy (`sdy`) ops, which IREE rejects. `platform` ("cpu", "cuda") picks JAX's
    lowering rules for that platform without needing its device; None means JAX's default backend.
    `grad`: of the training step (`lower_jax_grad`) instead of the forward.
    """
    share_gpu_with_torch()
    import jax

    fn = lower_jax_grad(graph) if grad else lower_jax(graph)
    traced = jax.jit(fn).trace(*input_specs(graph, grad=grad))
    return traced.lower(lowering_platforms=(platform,) if platform else None).as_text()
