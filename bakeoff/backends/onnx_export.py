"""The ONNX export as ONNX Runtime and TensorRT both take it: its options (`OnnxExportOptions`) and the
export with a shape sweep's dim a dynamic axis (`dynamic_model`). The lowering itself is
workloads/lower_onnx.py."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from bakeoff.backends.options import BackendOptions
from bakeoff.backends.sweep_server import SweepSpec
from bakeoff.workloads.lower_onnx import DEFAULT_OPSET, MIN_OPSET, lower_onnx


class OnnxExportOptions(BackendOptions):
    """Options of the ONNX export (`workloads.lower_onnx`), shared by ONNX Runtime and TensorRT."""

    opset: int = Field(DEFAULT_OPSET, ge=MIN_OPSET, description=f"ONNX opset to export (at least {MIN_OPSET}, "
                                                                 "at most the installed onnx's)")
    artifacts_dir: str | None = Field(None, min_length=1, max_length=4096,
                                      description="a folder: the exported model is written there, its path "
                                                  "recorded")
    attention: Literal["native", "decomposed"] = Field(
        "native", description="native: the opset-23 Attention op (the decomposed export where the runtime "
                              "cannot run it, with the reason recorded); decomposed: MatMul, Where, Softmax, MatMul")

    @field_validator("opset")
    @classmethod
    def _opset_known(cls, opset: int) -> int:
        try:
            from onnx.defs import onnx_opset_version
        except ImportError:   # without onnx the backend is unavailable: its cases are skipped anyway
            return opset
        if opset > onnx_opset_version():
            raise ValueError(f"opset {opset} is newer than the installed onnx knows ({onnx_opset_version()})")
        return opset



def dynamic_model(spec: SweepSpec, opts: OnnxExportOptions, attention: str) -> tuple[Any, str | None]:
    """The ONNX export of `spec`'s graph with the swept dim a dynamic axis (`dim_param`), or (None, why not).

    The graph is exported at two distinct values of the sweep; when the two models differ only in the sizes of
    their inputs, outputs and annotated intermediates (their nodes, attributes and initializers are the same),
    the export does not bake the dim into a constant, and the first one with the swept axes made symbolic
    serves every value. Otherwise (a reshape target, a causal mask's size) it does, with the reason."""
    a, b = sorted(set(spec.values))[:2]
    models = [lower_onnx(spec.bound_at(v), opts.opset, attention) for v in (a, b)]
    def body(m: Any) -> list[bytes]:
        return ([n.SerializeToString() for n in m.graph.node] +
                [t.SerializeToString() for t in m.graph.initializer])
    if body(models[0]) != body(models[1]):
        return None, (f"the ONNX export ({attention} attention) holds {spec.dim} in a constant (a reshape target "
                      "or a mask's size)")
    model = models[0]
    del model.graph.value_info[:]   # intermediate shapes annotated at the first value
    for value_info, node in zip(list(model.graph.input) + list(model.graph.output),
                                list(spec.graph.inputs) + list(spec.graph.output_nodes)):
        for axis, d in enumerate(node.shape):
            if isinstance(d, str) and spec.dim in d.split("*"):
                shape_dim = value_info.type.tensor_type.shape.dim[axis]
                shape_dim.ClearField("dim_value")
                shape_dim.dim_param = d.replace("*", "_")
    return model, None
