"""ONNX Runtime's fused attention: the export's opset-23 `Attention` nodes rewritten as ONNX Runtime contrib ops.

ONNX Runtime runs the standard `Attention` op as a generic kernel (on the CUDA provider: a GEMM, a softmax and a
GEMM); its fused attention kernels (flash, memory-efficient, cuDNN) sit behind the contrib ops of the
`com.microsoft` domain (https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md):

- `MultiHeadAttention`: query, key and value as (batch, seq, heads * head_dim); `num_heads`, `scale`,
  `unidirectional` (causal, top-left aligned as torch's `is_causal` when the query and key lengths are equal).
  Kernels: CPU float32; CUDA float32 and float16 (flash attention for float16 on sm_80+).
- `GroupQueryAttention` with `kv_num_heads == num_heads`, causal attention only: the same layout, plus
  `seqlens_k` (each batch row's total length - 1) and `total_sequence_length` for a prompt without a cache;
  its `present_key`/`present_value` outputs are named (the CUDA kernel writes them) and left unused.
  Kernels: CPU float32 and float16; CUDA float16 and bfloat16 (flash attention): the one fused attention the
  CUDA provider has for bfloat16.

`contrib_attention(model, op)` rewrites every `Attention` node of an exported model into the ops' (batch, seq,
hidden) layout one of two ways:
- **heads folded into the batch** (the default): (batch, heads, seq, head_dim) read as (batch * heads, seq,
  head_dim) with `num_heads` 1 — a reshape, no copy: attention is independent per (batch, head) pair, and the
  default scale 1/sqrt(head_dim) and the causal mask are the same. The result is reshaped back.
- **transposed** to (batch, seq, heads * head_dim) and back, when q, k and v are each made by a Transpose from
  that very layout (a transformer block's projections): ONNX Runtime's optimizer then cancels the transpose
  pairs, so nothing is copied either.
The reshapes read batch and sequence from their input's shape, so a model whose batch or sequence is a dynamic
axis stays dynamic. A node the op cannot express raises `ContribRefused` with the reason; the adapter then tries
the next form (onnxrt_session.py). `onnx` is imported inside the functions.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

CONTRIB_DOMAIN = "com.microsoft"
MHA, GQA = "MultiHeadAttention", "GroupQueryAttention"
CONTRIB_OPS = (MHA, GQA)
_BSNH = [0, 2, 1, 3]   # (batch, heads, seq, dim) <-> (batch, seq, heads, dim): its own inverse


class ContribRefused(ValueError):
    """The contrib op cannot express this attention node (the message says why)."""


def _shapes(model: "onnx.ModelProto") -> dict[str, list[int | str | None]]:
    """Each value's shape after ONNX shape inference: ints, dim_param names, or None where unknown."""
    from onnx import shape_inference

    inferred = shape_inference.infer_shapes(model)
    out = {}
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        out[vi.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in dims]
    return out


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


class _Rewriter:
    """Builds the replacement nodes of one model; every name it makes starts with `contrib.`."""

    def __init__(self, model: "onnx.ModelProto") -> None:
        self.model, self.shapes, self.nodes, self.inits = model, _shapes(model), [], []
        self._count = 0

    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"contrib.{hint}.{self._count}"

    def node(self, op: str, inputs: list[str], out: str | None = None, domain: str = "", **attrs: Any) -> str:
        from onnx import helper

        out = out or self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def ints(self, values: list[int], scalar: bool = False, elem: str = "INT64") -> str:
        from onnx import TensorProto, helper

        name = self.fresh("c")
        self.inits.append(helper.make_tensor(name, getattr(TensorProto, elem), [] if scalar else [len(values)],
                                             values))
        return name

    def to_bsd(self, x: str) -> str:
        """(batch, heads, seq, dim) -> (batch, seq, heads * dim)."""
        return self.node("Reshape", [self.node("Transpose", [x], perm=_BSNH), self.ints([0, 0, -1])])

    def from_bsd(self, y: str, heads: int, dim: int, out: str) -> str:
        """(batch, seq, heads * dim) -> (batch, heads, seq, dim), written to `out`."""
        return self.node("Transpose", [self.node("Reshape", [y, self.ints([0, 0, heads, dim])])], out, perm=_BSNH)

    def fold(self, x: str) -> str:
        """(batch, heads, seq, dim) -> (batch * heads, seq, dim): a reshape."""
        tail = self.node("Shape", [x], start=2, end=4)
        return self.node("Reshape", [x, self.node("Concat", [self.ints([-1]), tail], axis=0)])

    def unfold(self, y: str, like: str, out: str) -> str:
        """(batch * heads, seq, dim) -> (batch, heads, seq, dim), batch and heads those of `like`."""
        lead, tail = self.node("Shape", [like], start=0, end=2), self.node("Shape", [y], start=1, end=3)
        return self.node("Reshape", [y, self.node("Concat", [lead, tail], axis=0)], out)

    def made_by_bsnh_transpose(self, x: str) -> bool:
        """Whether `x` is the output of a Transpose with perm (0, 2, 1, 3)."""
        return any(n.op_type == "Transpose" and x in n.output and list(_attrs(n).get("perm", [])) == _BSNH
                   for n in self.model.graph.node)


def _check(node: Any, shapes: dict, op: str) -> tuple[int, int, int, bool, float | None]:
    """(heads, q head_dim, v head_dim, causal, scale) of an exported Attention node, or ContribRefused."""
    attrs = _attrs(node)
    extra = set(attrs) - {"is_causal", "scale", "softmax_precision"}
    if len([i for i in node.input if i]) != 3 or len([o for o in node.output if o]) != 1 or extra:
        raise ContribRefused(f"{op}: the Attention node uses inputs, outputs or attributes beyond q, k, v, "
                             f"is_causal and scale ({sorted(extra)})")
    q, k, v = (shapes.get(name) for name in node.input[:3])
    if any(s is None or len(s) != 4 for s in (q, k, v)):
        raise ContribRefused(f"{op}: needs q, k and v of rank 4 (batch, heads, seq, head_dim) with known ranks")
    heads, dq, dv = q[1], q[3], v[3]
    if not all(isinstance(d, int) and d > 0 for d in (heads, dq, dv)) or k[1] != heads or v[1] != heads:
        raise ContribRefused(f"{op}: needs static heads and head dims, the same number of heads in q, k and v "
                             f"(q {q}, k {k}, v {v})")
    causal = bool(attrs.get("is_causal", 0))
    if op == GQA and not causal:
        raise ContribRefused(f"{op}: computes causal attention (its CUDA kernel is causal whatever the attributes)")
    if (causal or op == GQA) and q[2] != k[2]:
        raise ContribRefused(f"{op}: query length {q[2]} and key length {k[2]} differ: its causal mask (and "
                             "GroupQueryAttention's prompt) are defined for equal lengths")
    if op == GQA and dq != dv:
        raise ContribRefused(f"{op}: needs the same head dim for q and v ({dq}, {dv})")
    return heads, dq, dv, causal, attrs.get("scale")


def _prompt_lengths(rw: _Rewriter, q_bsd: str, q_shape: list) -> tuple[str, str]:
    """GroupQueryAttention's `seqlens_k` (int32 (batch,): each row's total length - 1) and
    `total_sequence_length` (int32 scalar) for a prompt without a cache: constants where batch and sequence
    are static, else read from the shape of `q_bsd` (batch, seq, hidden)."""
    batch, seq = q_shape[0], q_shape[2]
    if isinstance(batch, int) and isinstance(seq, int) and batch > 0 and seq > 0:
        return rw.ints([seq - 1] * batch, elem="INT32"), rw.ints([seq], scalar=True, elem="INT32")
    length = rw.node("Cast", [rw.node("Shape", [q_bsd], start=1, end=2)], to=6)             # int32, (1,)
    rows = rw.node("Shape", [q_bsd], start=0, end=1)
    seqlens_k = rw.node("Expand", [rw.node("Sub", [length, rw.ints([1], elem="INT32")]), rows])
    return seqlens_k, rw.node("Squeeze", [length, rw.ints([0])])


def _replace(rw: _Rewriter, node: Any, op: str) -> None:
    """Append the contrib form of Attention `node` to `rw.nodes`."""
    from onnx import helper

    heads, dq, dv, causal, scale = _check(node, rw.shapes, op)
    transposed = all(rw.made_by_bsnh_transpose(x) for x in node.input[:3])
    q, k, v = (rw.to_bsd(x) if transposed else rw.fold(x) for x in node.input[:3])
    q_shape = rw.shapes[node.input[0]]
    if not transposed:  # one head per row of the folded batch
        heads = 1
        batch = q_shape[0] * q_shape[1] if all(isinstance(d, int) and d > 0 for d in q_shape[:2]) else None
        q_shape = [batch, 1] + q_shape[2:]
    attrs: dict[str, Any] = {"num_heads": heads, "scale": float(scale if scale is not None else dq ** -0.5)}
    if op == MHA:
        y = rw.node(MHA, [q, k, v], domain=CONTRIB_DOMAIN, unidirectional=int(causal), **attrs)
    else:
        seqlens_k, total = _prompt_lengths(rw, q, q_shape)
        # present_key/present_value named although unused: the CUDA kernel writes the cache it is given
        y, present_k, present_v = rw.fresh("gqa"), rw.fresh("present_key"), rw.fresh("present_value")
        rw.nodes.append(helper.make_node(GQA, [q, k, v, "", "", seqlens_k, total], [y, present_k, present_v],
                                         name=y, domain=CONTRIB_DOMAIN, kv_num_heads=heads, **attrs))
    if transposed:
        rw.from_bsd(y, heads, dv, node.output[0])
    else:
        rw.unfold(y, node.input[0], node.output[0])


def contrib_attention(model: "onnx.ModelProto", op: str) -> "onnx.ModelProto":
    """A copy of `model` with every ONNX `Attention` node computed by contrib op `op` (MHA or GQA).

    Raises ContribRefused when a node does not fit the op, or when the model has no Attention node."""
    import onnx
    from onnx import helper

    if op not in CONTRIB_OPS:
        raise ValueError(f"contrib attention op must be one of {list(CONTRIB_OPS)}, got {op!r}")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rw = _Rewriter(out)
    found = 0
    for node in out.graph.node:
        if node.op_type == "Attention" and node.domain in ("", "ai.onnx"):
            _replace(rw, node, op)
            found += 1
        else:
            rw.nodes.append(node)
    if not found:
        raise ContribRefused(f"{op}: the export has no Attention node to rewrite")
    del out.graph.node[:]
    out.graph.node.extend(rw.nodes)
    out.graph.initializer.extend(rw.inits)
    if not any(o.domain == CONTRIB_DOMAIN for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(CONTRIB_DOMAIN, 1))
    return out


def contrib_words(op: str) -> str:
    """The record's lowering words for sdpa computed by contrib op `op`."""
    kernels = ("flash or memory-efficient attention on CUDA" if op == MHA else
               "flash attention on CUDA, the provider's fused attention for bfloat16")
    return (f"contrib: {CONTRIB_DOMAIN}.{op} (ONNX Runtime's fused attention: {kernels}; heads folded into the "
            "batch by a reshape, or, for operands transposed from (batch, seq, heads, head_dim), transposed back "
            "so that the transposes cancel)")
