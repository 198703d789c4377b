"""An ONNX model as text, one line per node (op type, name, inputs -> outputs, attributes): the artifact the
report shows for ONNX Runtime and TensorRT, before and after ONNX Runtime's own graph optimizations."""
from __future__ import annotations

from typing import Any

MAX_ATTRIBUTE_CHARS = 80


def _type(value_info: Any) -> str:
    """'float[37,300]' from a ValueInfoProto ('?' for dims without a value)."""
    from onnx import TensorProto

    t = value_info.type.tensor_type
    dims = ",".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim)
    return f"{TensorProto.DataType.Name(t.elem_type).lower()}[{dims}]"


def _attribute(attr: Any) -> str:
    from onnx import helper, numpy_helper

    value = helper.get_attribute_value(attr)
    if hasattr(value, "dims"):  # a TensorProto: its shape and dtype, not its bytes
        arr = numpy_helper.to_array(value)
        text = f"tensor{list(arr.shape)} {arr.dtype}" + (f" = {arr.item()!r}" if arr.size == 1 else "")
    elif isinstance(value, bytes):
        text = value.decode(errors="replace")
    else:
        text = repr(value)
    text = text if len(text) <= MAX_ATTRIBUTE_CHARS else text[:MAX_ATTRIBUTE_CHARS - 1] + "…"
    return f"{attr.name}={text}"


def node_list(model: Any) -> str:
    """The model's graph as lines: its inputs, one line per node in order, its outputs."""
    g = model.graph
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=None)
    inits = {i.name for i in g.initializer}
    lines = [f"graph {g.name}: {len(g.node)} nodes, opset {opset}, {len(inits)} initializers",
             "inputs: " + ", ".join(f"{v.name} {_type(v)}" for v in g.input if v.name not in inits)]
    for i, n in enumerate(g.node):
        op = f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type
        attrs = " ".join(_attribute(a) for a in n.attribute)
        lines.append(f"#{i} {op} {n.name!r} ({', '.join(n.input)}) -> ({', '.join(n.output)})"
                     + (f"  {attrs}" if attrs else ""))
    lines.append("outputs: " + ", ".join(f"{v.name} {_type(v)}" for v in g.output))
    return "\n".join(lines) + "\n"
