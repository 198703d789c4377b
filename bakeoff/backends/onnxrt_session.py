"""From a bound graph to an ONNX Runtime session: the attention forms to try in order, the optional
onnxruntime.transformers pass, and the first session the provider opens.

Attention forms (option `attention`), each tried only where the one before it cannot run:
- contrib: `com.microsoft.MultiHeadAttention`, then `com.microsoft.GroupQueryAttention` (onnx_contrib.py), then
  the standard `Attention`, then the decomposed form: the fastest attention the provider has for the dtype
  (its CUDA MultiHeadAttention has no bfloat16 kernel; GroupQueryAttention has).
- native: the opset-23 `Attention` op, then the decomposed form.
- decomposed: MatMul, Mul, Where, Softmax, MatMul.
A graph without sdpa is exported once. The record's `lowering["sdpa"]` names the form that ran and why each
form before it did not.

`optimize="transformers"` runs `onnxruntime.transformers.optimizer.optimize_model` (model type "bert", the
generic transformer fusions: SkipLayerNormalization, BiasGelu, FastGelu, ...; `opt_level=0`: its Python
fusions only, ONNX Runtime's own graph optimizations stay the session's `graph_optimization_level`) on the
exported model; `optimize_notes` says which ops it fused. Its fusions match constant weights and biases
(initializers); the suite's weights are graph inputs, bound per run as eager gets them.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from bakeoff.backends.onnx_export import dynamic_model
from bakeoff.backends.onnx_contrib import CONTRIB_OPS, ContribRefused, contrib_attention, contrib_words
from bakeoff.backends.sweep_server import SweepSpec
from bakeoff.workloads.ir import Graph
from bakeoff.workloads.lower_onnx import ATTENTION_OPSET, lower_onnx, lowering_paths


@dataclass(frozen=True)
class AttentionForm:
    """One way to export sdpa: `export` is lower_onnx's attention argument, `contrib_op` the contrib op the
    export's Attention nodes become (None: kept as exported)."""

    export: str
    contrib_op: str | None = None

    @property
    def label(self) -> str:
        return f"com.microsoft.{self.contrib_op}" if self.contrib_op else f"{self.export} attention"


def attention_forms(graph: Graph, opset: int, attention: str) -> list[AttentionForm]:
    """The forms to try for `graph`, best first, for option `attention` ("contrib", "native", "decomposed")."""
    if not any(n.op == "sdpa" for n in graph.nodes):
        return [AttentionForm("native")]
    if attention == "decomposed":
        return [AttentionForm("decomposed")]
    forms = [AttentionForm("native"), AttentionForm("decomposed")]
    if opset < ATTENTION_OPSET:   # the native export is the decomposed one; nothing to rewrite either
        return forms[1:]
    if attention == "contrib":
        forms = [AttentionForm("native", op) for op in CONTRIB_OPS] + forms
    return forms


def counts(model: Any) -> Counter:
    """Op histogram of an ONNX model, contrib ops as `com.microsoft.Op`."""
    return Counter((f"{n.domain}." if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in model.graph.node)


def transformers_optimize(model: Any, device: str) -> tuple[Any, str]:
    """`model` through onnxruntime.transformers' optimizer (Python fusions only), and what it changed, in words;
    where the optimizer raises, `model` unchanged and the error in words."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    import onnx

    before = counts(model)
    work = onnx.ModelProto()
    work.CopyFrom(model)   # optimize_model rewrites the model it is given in place
    options = FusionOptions("bert")
    options.enable_shape_inference = False   # its symbolic shape inference knows no opset-23 Attention
    # Its modules log under their bare names ("fusion_skiplayernorm"): silence warnings such as "Model producer
    # not matched" (the model is bakeoff's, not PyTorch's) for the call, then restore the process's setting.
    level = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        optimized = optimize_model(work, model_type="bert", optimization_options=options, opt_level=0,
                                   use_gpu=device.startswith("cuda")).model
    except Exception as exc:   # a fusion pass that crashes on a pattern it half-matches: run the export as is
        return model, (f"optimize=transformers failed, the export ran unoptimized: {type(exc).__name__}: "
                       f"{str(exc)[:200]}")
    finally:
        logging.disable(level)
    after = counts(optimized)
    fused = sorted(op for op in after if after[op] > before.get(op, 0))
    words = (f"fused {', '.join(f'{op} x{after[op] - before.get(op, 0)}' for op in fused)}" if fused else
             "no fusion matched (its fusions need constant weights and biases; these are graph inputs)")
    return optimized, f"optimize=transformers (onnxruntime.transformers optimize_model, bert fusions): {words}"


def _reason(exc: Exception) -> str:
    return str(exc).split(" : ")[-1].strip()[:300]


def open_session(graph: Graph, device: str, opts: Any,
                 make_session: Callable[[bytes], Any]) -> tuple[Any, Any, dict, dict, list[str]]:
    """Export `graph` in the first attention form whose session opens: (model, session, seconds per stage,
    lowering paths, notes). A contrib rewrite that does not fit, or a session the provider refuses, moves on
    to the next form; the last form's failure, and any lowering error, propagates."""
    import onnxruntime as ort

    provider = "CUDA" if device.startswith("cuda") else "CPU"
    forms = attention_forms(graph, opts.opset, opts.attention)
    stages = {"export": 0.0}
    tried: list[str] = []
    for i, form in enumerate(forms):
        t0 = time.perf_counter()
        model = lower_onnx(graph, opts.opset, form.export)
        try:
            model = contrib_attention(model, form.contrib_op) if form.contrib_op else model
        except ContribRefused as exc:
            tried.append(f"{form.label}: {exc}")
            stages["export"] += time.perf_counter() - t0
            continue
        t1 = time.perf_counter()
        stages["export"] += t1 - t0
        notes = []
        if opts.optimize == "transformers":
            model, words = transformers_optimize(model, device)
            notes.append(words)
            stages["optimize"] = stages.get("optimize", 0.0) + time.perf_counter() - t1
            t1 = time.perf_counter()
        try:
            session = make_session(model.SerializeToString())
        except Exception as exc:
            if i == len(forms) - 1:
                raise
            stages[f"session_failed_{form.contrib_op or form.export}"] = time.perf_counter() - t1
            tried.append(f"{form.label}: onnxruntime {ort.__version__} {provider} provider could not run it: "
                         f"{_reason(exc)}")
            continue
        stages["session"] = time.perf_counter() - t1
        paths = lowering_paths(graph, opts.opset, form.export)
        if form.contrib_op:
            paths["sdpa"] = contrib_words(form.contrib_op)
        if tried:
            paths["sdpa"] += " (tried before it: " + "; ".join(tried) + ")"
        return model, session, stages, paths, notes
    raise AssertionError("unreachable: the last attention form returns or raises")


def sweep_models(spec: SweepSpec, opts: Any, device: str) -> Iterator[tuple[str, Any, str | None, bool]]:
    """(form label, model with the swept dim dynamic or None, why not, whether it is the last form) for each
    attention form of `spec`'s graph, in `attention_forms` order, each exported only when asked for: a shape
    sweep's counterpart of `open_session`'s exports."""
    forms = attention_forms(spec.bound_at(max(spec.values)), opts.opset, opts.attention)
    for i, form in enumerate(forms):
        model, reason = dynamic_model(spec, opts, form.export)
        if model is not None and form.contrib_op:
            try:
                model = contrib_attention(model, form.contrib_op)
            except ContribRefused as exc:
                model, reason = None, f"{form.label}: {exc}"
        if model is not None and opts.optimize == "transformers":
            model = transformers_optimize(model, device)[0]
        yield form.label, model, reason, i == len(forms) - 1
