"""Lower a bound graph to an ONNX model (onnx.helper), using native ONNX ops where the opset has them.

Mirrors `lower_torch`: layer_norm -> LayerNormalization, gelu -> Gelu (opset >= 20), rms_norm ->
RMSNormalization (opset >= 23, else decomposed with float32 statistics like the native op's stash_type),
softmax -> Softmax(axis=-1); sdpa -> Attention (opset >= 23, softmax in float32 for 16-bit inputs as
PyTorch's kernels compute it) with `attention="native"`, or decomposed (MatMul, Mul by `sdpa_scale`, causal
Where, Softmax, MatMul) with `attention="decomposed"`, which every runtime that reads ONNX can run; the
runtimes fall back to it, with the reason recorded, where they lack an Attention kernel. `lowering_paths`
says in words which form each composite takes. Scalar constants become initializers in the dtype of the
op that reads them (PyTorch folds a Python float into the tensor's dtype the same way).

The default opset is 23, the first with RMSNormalization (onnx >= 1.18). Checked by trying: onnxruntime 1.23.0,
1.30.0 and 1.32.0 load it and match the fp64 reference once the model's IR version is at most what they know
(onnx 1.23's `make_model` stamps IR 14, which onnxruntime 1.30 rejects: "max supported IR version: 13"), so
the IR version is set to the lowest one the opset needs (11); onnxruntime 1.22 knows IR 10 only. TensorRT's
parser accepts opsets 9 to 24 (https://github.com/onnx/onnx-tensorrt/blob/main/docs/operators.md, for TensorRT
10.15). Reductions take `axes` as an input, which every reduce op does from opset 18 on: that is the lowest opset
this lowering writes.

`onnx` is imported inside the functions: this module imports without it.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from bakeoff.workloads.decompose import sdpa_scale
from bakeoff.workloads.ir import Graph, Node
from bakeoff.workloads.routes import routes_by_op

if TYPE_CHECKING:
    import onnx

DEFAULT_OPSET = 23
MIN_OPSET = 18          # ReduceMax/ReduceMean take axes as an input from 18 on
GELU_OPSET = 20         # Gelu(approximate=none|tanh)
RMS_NORM_OPSET = 23     # RMSNormalization
ATTENTION_OPSET = 23    # Attention
ATTENTION_FORMS = ("native", "decomposed")

_SIMPLE_UNARY = {"neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "tanh": "Tanh", "erf": "Erf",
                 "sigmoid": "Sigmoid", "relu": "Relu"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Max", "matmul": "MatMul"}
_REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax"}


def onnx_elem_type(dtype: str) -> int:
    """The onnx.TensorProto element type of a bakeoff dtype name."""
    from onnx import TensorProto

    return {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
            "float64": TensorProto.DOUBLE}[dtype]


def input_names(graph: Graph) -> list[str]:
    """ONNX input names, in graph input order: the graph's own input names."""
    return [n.attr("name") for n in graph.inputs]


def output_names(graph: Graph) -> list[str]:
    """ONNX output names, in graph output order. The dot keeps them apart from input names (identifiers)."""
    return [f"out.{i}" for i in range(len(graph.outputs))]


class _Emitter:
    """Builds the node and initializer lists.

    Every value name it makes has a dot (`t.<node id>`, `mul.3`, `c.7`), so none clashes with a graph input's
    name, which is an identifier.
    """

    def __init__(self, graph: Graph, opset: int, attention: str = "decomposed") -> None:
        self.graph, self.opset, self.attention = graph, opset, attention
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.names: dict[int, str] = {}
        self._consts: dict[tuple, str] = {}
        self._count = 0

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}.{self._count}"

    def node(self, op: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        out = out or self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def scalar(self, value: float, dtype: str) -> str:
        """A scalar (shape ()) float initializer in `dtype`, shared by every reader of the same value."""
        from onnx import helper

        key = ("f", float(value), dtype)
        if key not in self._consts:
            name = self.fresh("c")
            # make_tensor rounds the Python float to float16/bfloat16 itself (round to nearest even).
            self.inits.append(helper.make_tensor(name, onnx_elem_type(dtype), [], [float(value)]))
            self._consts[key] = name
        return self._consts[key]

    def vector(self, values: list[float], dtype: str) -> str:
        from onnx import helper

        key = ("v", tuple(values), dtype)
        if key not in self._consts:
            name = self.fresh("c")
            self.inits.append(helper.make_tensor(name, onnx_elem_type(dtype), [len(values)], values))
            self._consts[key] = name
        return self._consts[key]

    def ints(self, values: list[int] | tuple[int, ...], scalar: bool = False) -> str:
        """An int64 initializer (axes, shapes, Range bounds)."""
        from onnx import TensorProto, helper

        key = ("i", tuple(values), scalar)
        if key not in self._consts:
            name = self.fresh("c")
            self.inits.append(helper.make_tensor(name, TensorProto.INT64, [] if scalar else [len(values)],
                                                 list(values)))
            self._consts[key] = name
        return self._consts[key]

    def arg(self, node_id: int, dtype: str) -> str:
        """The value of input node `node_id` as read by an op computing in `dtype` (constants take that dtype)."""
        src = self.graph.node(node_id)
        if src.op == "const":
            return self.scalar(src.attr("value"), dtype)
        return self.names[node_id]


def _last_axis(e: _Emitter) -> str:
    return e.ints([-1])


def _reduce(e: _Emitter, op: str, x: str, out: str | None = None) -> str:
    """ReduceSum/Mean/Max over the last axis, kept as size 1 (axes as an input, as opset 18 wants)."""
    return e.node(_REDUCE[op], [x, _last_axis(e)], out, keepdims=1)


def _causal_mask(e: _Emitter, x: str, rows: int, cols: int, dtype: str, out: str | None = None) -> str:
    """Where(col <= row, x, -inf) over the last two axes (rows x cols).

    The mask is built from two Range ops rather than stored, so the model stays small at any sequence length;
    runtimes fold it to a constant. Where (not an additive -inf mask) keeps +inf scores from becoming NaN.
    """
    zero, one = e.ints([0], scalar=True), e.ints([1], scalar=True)
    r = e.node("Range", [zero, e.ints([rows], scalar=True), one])
    c = e.node("Range", [zero, e.ints([cols], scalar=True), one])
    r = e.node("Unsqueeze", [r, e.ints([1])])                      # (rows, 1)
    keep = e.node("GreaterOrEqual", [r, c])                         # (rows, cols): col <= row
    return e.node("Where", [keep, x, e.scalar(float("-inf"), dtype)], out)


def _gelu(e: _Emitter, x: str, n: Node, out: str) -> str:
    """Gelu (opset >= 20) or its formula: 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation."""
    approx = n.attr("approximate")
    if e.opset >= GELU_OPSET:
        return e.node("Gelu", [x], out, approximate=approx)
    dt = n.dtype
    if approx == "tanh":
        cube = e.node("Mul", [e.node("Mul", [x, x]), x])
        inner = e.node("Add", [x, e.node("Mul", [cube, e.scalar(0.044715, dt)])])
        t = e.node("Tanh", [e.node("Mul", [inner, e.scalar((2.0 / 3.141592653589793) ** 0.5, dt)])])
    else:
        t = e.node("Erf", [e.node("Mul", [x, e.scalar(0.5 ** 0.5, dt)])])
    return e.node("Mul", [e.node("Mul", [x, e.scalar(0.5, dt)]), e.node("Add", [t, e.scalar(1.0, dt)])], out)


def _rms_norm(e: _Emitter, n: Node, x: str, w: str | None, out: str) -> str:
    """RMSNormalization (opset >= 23; scale of ones when the graph has no weight) or its decomposition."""
    dt, eps = n.dtype, float(n.attr("eps"))
    if e.opset >= RMS_NORM_OPSET:
        scale = w or e.vector([1.0] * int(n.shape[-1]), dt)
        return e.node("RMSNormalization", [x, scale], out, axis=-1, epsilon=eps, stash_type=1)
    # The native op's semantics: statistics in float32 (stash_type=1), cast back, then scale.
    xf = x if dt in ("float32", "float64") else e.node("Cast", [x], to=onnx_elem_type("float32"))
    sdt = dt if dt in ("float32", "float64") else "float32"
    ms = _reduce(e, "mean", e.node("Mul", [xf, xf]))
    inv = e.node("Reciprocal", [e.node("Sqrt", [e.node("Add", [ms, e.scalar(eps, sdt)])])])
    y = e.node("Mul", [xf, inv])
    if sdt != dt:
        y = e.node("Cast", [y], to=onnx_elem_type(dt))
    return e.node("Mul", [y, w], out) if w else e.node("Identity", [y], out)


def sdpa_form(graph: Graph, n: Node, opset: int, attention: str) -> tuple[str, str]:
    """("native" | "decomposed", words) for sdpa node `n` at `opset` with option `attention`."""
    if attention not in ATTENTION_FORMS:
        raise ValueError(f"attention must be one of {list(ATTENTION_FORMS)}, got {attention!r}")
    if attention == "decomposed":
        return "decomposed", "decomposed (MatMul, Mul, Where, Softmax, MatMul): option attention=decomposed"
    if opset < ATTENTION_OPSET:
        return "decomposed", f"decomposed: opset {opset} has no Attention (opset {ATTENTION_OPSET} and later)"
    q, k, v = (graph.node(i) for i in n.inputs)
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        return "decomposed", "decomposed: ONNX Attention needs q, k and v with the same leading dims"
    softmax = ", softmax in float32" if n.dtype in ("float16", "bfloat16") else ""
    return "native", f"native: ONNX Attention (opset {ATTENTION_OPSET}{softmax})"


def _sdpa_native(e: _Emitter, n: Node, q: str, k: str, v: str, out: str) -> str:
    """Attention on 4-D (batch, heads, seq, head dim) inputs; other ranks are reshaped to that and back."""
    q_shape, k_shape, v_shape = (tuple(int(d) for d in e.graph.node(i).shape) for i in n.inputs)
    attrs = {"is_causal": int(bool(n.attr("causal"))), "scale": sdpa_scale(n, q_shape[-1])}
    if n.dtype in ("float16", "bfloat16"):
        attrs["softmax_precision"] = onnx_elem_type("float32")
    lead = q_shape[:-2]
    if len(lead) == 2:
        return e.node("Attention", [q, k, v], out, **attrs)
    b, heads = (1, 1) if not lead else ((lead[0], 1) if len(lead) == 1 else (math.prod(lead[:-1]), lead[-1]))
    q4, k4, v4 = (e.node("Reshape", [x, e.ints([b, heads, shape[-2], shape[-1]])])
                  for x, shape in ((q, q_shape), (k, k_shape), (v, v_shape)))
    y = e.node("Attention", [q4, k4, v4], **attrs)
    return e.node("Reshape", [y, e.ints(list(lead) + [q_shape[-2], v_shape[-1]])], out)


def _sdpa(e: _Emitter, n: Node, q: str, k: str, v: str, out: str) -> str:
    """softmax(q @ k^T * scale [causal]) @ v, as lower_torch's F.scaled_dot_product_attention computes it."""
    if sdpa_form(e.graph, n, e.opset, e.attention)[0] == "native":
        return _sdpa_native(e, n, q, k, v, out)
    q_shape, k_shape = e.graph.node(n.inputs[0]).shape, e.graph.node(n.inputs[1]).shape
    rank = len(k_shape)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    s = e.node("MatMul", [q, e.node("Transpose", [k], perm=perm)])
    s = e.node("Mul", [s, e.scalar(sdpa_scale(n, q_shape[-1]), n.dtype)])
    if n.attr("causal"):
        s = _causal_mask(e, s, int(q_shape[-2]), int(k_shape[-2]), n.dtype)
    return e.node("MatMul", [e.node("Softmax", [s], axis=-1), v], out)


def _lower_node(e: _Emitter, n: Node, out: str) -> str:
    """Emit the ONNX nodes computing `n`; the last one writes `out`. Returns `out`."""
    op, dt = n.op, n.dtype
    if op == "cast":   # the one op whose input dtype differs from its own
        src = e.graph.node(n.inputs[0])
        return e.node("Cast", [e.arg(src.id, src.dtype)], out, to=onnx_elem_type(n.attr("dtype")))
    a = [e.arg(i, dt) for i in n.inputs]
    if op in _SIMPLE_UNARY:
        return e.node(_SIMPLE_UNARY[op], a, out)
    if op in _BINARY:
        return e.node(_BINARY[op], a, out)
    if op in _REDUCE:
        return _reduce(e, op, a[0], out)
    if op == "rsqrt":
        return e.node("Reciprocal", [e.node("Sqrt", a)], out)
    if op == "silu":
        return e.node("Mul", [a[0], e.node("Sigmoid", a)], out)
    if op == "gelu":
        return _gelu(e, a[0], n, out)
    if op == "pow":
        return e.node("Pow", [a[0], e.scalar(n.attr("exponent"), dt)], out)
    if op == "causal_mask":
        return _causal_mask(e, a[0], int(n.shape[-2]), int(n.shape[-1]), dt, out)
    if op == "var":
        d = e.node("Sub", [a[0], _reduce(e, "mean", a[0])])
        ss = _reduce(e, "sum", e.node("Mul", [d, d]))
        # As torch and NumPy define it: sum of squared deviations / (N - correction).
        count = int(e.graph.node(n.inputs[0]).shape[-1]) - float(n.attr("correction"))
        return e.node("Div", [ss, e.scalar(count, dt)], out)
    if op == "reshape":
        return e.node("Reshape", [a[0], e.ints([int(d) for d in n.attr("shape")])], out)
    if op == "transpose":
        return e.node("Transpose", a, out, perm=list(n.attr("perm")))
    if op == "broadcast":
        return e.node("Expand", [a[0], e.ints([int(d) for d in n.attr("shape")])], out)
    if op == "layer_norm":
        scale = a[1] if len(a) > 1 else e.vector([1.0] * int(n.shape[-1]), dt)
        return e.node("LayerNormalization", [a[0], scale] + a[2:3], out, axis=-1,
                      epsilon=float(n.attr("eps")), stash_type=1)
    if op == "rms_norm":
        return _rms_norm(e, n, a[0], a[1] if len(a) > 1 else None, out)
    if op == "softmax":
        return e.node("Softmax", a, out, axis=-1)
    if op == "sdpa":
        return _sdpa(e, n, a[0], a[1], a[2], out)
    raise NotImplementedError(f"no ONNX lowering for op {op!r}")


def lowering_paths(graph: Graph, opset: int = DEFAULT_OPSET, attention: str = "native") -> dict[str, str]:
    """Which ONNX form each composite op of `graph` (and gelu) takes in `lower_onnx`, in words; several sdpa
    nodes on different forms are joined with '; '."""
    def route_of(n: Node) -> str | None:
        if n.op == "sdpa":
            return sdpa_form(graph, n, opset, attention)[1]
        if n.op == "layer_norm":
            return "native: LayerNormalization (float32 statistics)"
        if n.op == "rms_norm":
            return ("native: RMSNormalization (float32 statistics)" if opset >= RMS_NORM_OPSET else
                    f"decomposed: opset {opset} has no RMSNormalization (float32 statistics kept)")
        if n.op == "softmax":
            return "native: Softmax"
        if n.op == "gelu":
            return "native: Gelu" if opset >= GELU_OPSET else f"decomposed: opset {opset} has no Gelu"
        return None

    return routes_by_op(graph, route_of)


def lower_onnx(graph: Graph, opset: int = DEFAULT_OPSET, attention: str = "native") -> "onnx.ModelProto":
    """An ONNX model computing `graph` (bound). Inputs keep the graph's names; outputs are `output_names`.
    `attention` ("native" or "decomposed") picks sdpa's form (`sdpa_form`).

    The model is validated with `onnx.checker.check_model(full_check=True)` (structure, opset schemas and strict
    shape inference) before it is returned, so every consumer (ONNX Runtime, TensorRT) gets a checked model; a
    failure raises onnx.checker.ValidationError (or InferenceError) naming the node. Cheap here: the only
    initializers are scalars and small index vectors, the weights being graph inputs.
    """
    from onnx import checker, helper

    if not graph.is_bound():
        raise ValueError("lower_onnx needs a bound graph (workloads.ir.bind)")
    if opset < MIN_OPSET:
        raise ValueError(f"lower_onnx writes opset {MIN_OPSET} or later, got {opset}")
    if attention not in ATTENTION_FORMS:
        raise ValueError(f"attention must be one of {list(ATTENTION_FORMS)}, got {attention!r}")
    e = _Emitter(graph, opset, attention)
    ins = []
    for n in graph.inputs:
        e.names[n.id] = n.attr("name")
        ins.append(helper.make_tensor_value_info(n.attr("name"), onnx_elem_type(n.dtype), list(n.shape)))
    outs = output_names(graph)
    # A node that is an output (the first time it is listed) writes straight to the output name.
    direct = {}
    for i, nid in reversed(list(enumerate(graph.outputs))):
        direct[nid] = outs[i]
    for n in graph.nodes:
        if n.op in ("input", "const"):
            continue
        e.names[n.id] = _lower_node(e, n, direct.get(n.id) or f"t.{n.id}")
    done = {e.names[nid] for nid in graph.outputs if graph.node(nid).op not in ("input", "const")}
    for i, nid in enumerate(graph.outputs):
        if outs[i] not in done:   # an input, a constant, or a node listed twice: copy it to the output name
            e.node("Identity", [e.arg(nid, graph.node(nid).dtype)], outs[i])
            done.add(outs[i])
    out_vi = [helper.make_tensor_value_info(outs[i], onnx_elem_type(graph.node(nid).dtype),
                                            list(graph.node(nid).shape)) for i, nid in enumerate(graph.outputs)]
    g = helper.make_graph(e.nodes, graph.name, ins, out_vi, initializer=e.inits)
    opsets = [helper.make_opsetid("", opset)]
    # The lowest IR version the opset allows: newer onnx stamps an IR version older runtimes refuse.
    model = helper.make_model(g, opset_imports=opsets, producer_name="bakeoff",
                              ir_version=helper.find_min_ir_version_for(opsets))
    checker.check_model(model, full_check=True)
    return model


def model_summary(model: "onnx.ModelProto") -> dict[str, Any]:
    """Size in bytes, opset, IR version, node count and op-type histogram of a model."""
    return {"onnx_bytes": model.ByteSize(), "opset": max(o.version for o in model.opset_import if o.domain == ""),
            "ir_version": model.ir_version, "nodes": len(model.graph.node),
            "op_types": dict(sorted(Counter(n.op_type for n in model.graph.node).items()))}
