"""Training steps in process (no CLI): cotangents, the backward cost model, each backend's step against the
float64 reverse-mode reference (IREE from the vjp's StableHLO among them), and verdicts naming the gradient."""
from __future__ import annotations

import pytest
import torch

from bakeoff.backends import get_backend
from bakeoff.backends.base import TensorSpec
from bakeoff.backends.options import NoOptions
from bakeoff.harness.measure.checks import check_outputs, reference_outputs
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads import costs
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.grad import grad_inputs, step_output_names
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads


def _graph(name: str, dims: dict[str, int], dtype: str = "float32"):
    return bind(builtin_workloads()[name].graph, dims, dtype)


MLP = ("mlp_block", {"B": 1, "S": 5, "D": 8, "F": 12})


def test_cotangents_follow_the_inputs_and_are_the_same_every_time():
    graph = _graph(*MLP)
    fwd = make_inputs(graph, 3, "cpu")
    step = make_inputs(graph, 3, "cpu", grad=True)
    again = make_inputs(graph, 3, "cpu", grad=True)
    other = make_inputs(graph, 4, "cpu", grad=True)
    assert len(step) == len(fwd) + len(graph.outputs)
    assert all(torch.equal(a, b) for a, b in zip(fwd, step))  # the forward case's inputs, unchanged
    assert all(torch.equal(a, b) for a, b in zip(step, again))
    ct = step[-1]
    assert tuple(ct.shape) == tuple(graph.output_nodes[0].shape) and ct.dtype == torch.float32
    assert not torch.equal(ct, other[-1]) and 0.8 < float(ct.std()) < 1.2


def test_cotangents_take_the_output_dtype():
    graph = _graph("gemm_bias_gelu", {"M": 4, "K": 6, "N": 5}, "bfloat16")
    assert make_inputs(graph, 0, "cpu", grad=True)[-1].dtype == torch.bfloat16


def test_backward_cost_rules():
    b = GraphBuilder("mm")
    graph = bind(b.finish([b.matmul(b.input("a", (4, 6)), b.input("b", (6, 5)))]), {}, "float32")
    assert costs.backward_flops(graph) == 2 * costs.flops(graph) == 2 * 2 * 4 * 6 * 5
    assert costs.flops(graph, grad=True) == 3 * costs.flops(graph)
    # inputs and cotangents read once, outputs and gradients written once
    assert costs.step_min_bytes(graph, True) == 2 * costs.min_bytes(graph)
    b = GraphBuilder("bias")
    x, bias = b.input("x", (4, 6)), b.input("b", (6,))
    graph = bind(b.finish([b.tanh(b.add(x, bias))]), {}, "float32")
    # tanh: 2 per element; add: 0, plus 1 per element to sum the broadcast bias's gradient back
    assert costs.backward_flops(graph) == 2 * 24 + 24
    causal = _graph("attention", {"B": 1, "H": 2, "S": 16, "Dh": 8})
    scores = 2 * 16 * 16
    assert costs.backward_flops(causal) == (2 * (2 * scores * 8 * 2) + 3 * scores) // 2


def test_every_builtin_workload_has_backward_costs():
    for name, w in builtin_workloads().items():
        dims = {k: 4 for n in w.graph.inputs for d in n.shape if isinstance(d, str) for k in d.split("*")}
        graph = bind(w.graph, dims, "float32")
        assert costs.flops(graph, grad=True) > costs.flops(graph), name


def _step(backend: str, graph, seed: int = 0):
    inputs = make_inputs(graph, seed, "cpu", grad=True)
    b, eager_backend = get_backend(backend), get_backend("eager")
    compiled = b.compile_grad(graph, TensorSpec.of_inputs(graph), "cpu", b.Options())
    eager = eager_backend.compile_grad(graph, TensorSpec.of_inputs(graph), "cpu", eager_backend.Options())
    refs = reference_outputs(graph, inputs, "cpu", grad=True)
    return check_outputs(graph, seed, compiled(*inputs), eager(*inputs), refs,
                         names=step_output_names(graph, True))


@pytest.mark.parametrize("backend", ["eager", "xla", "iree"])
def test_backend_steps_match_the_reference(backend):
    reason = get_backend(backend).available()
    if reason:
        pytest.skip(reason)
    graph = _graph("attn_block", {"B": 1, "S": 6, "H": 2, "Dh": 4})
    check = _step(backend, graph)
    assert check.verdict.status == "ok", check.verdict.reason
    assert set(check.per_output) == set(step_output_names(graph, True))
    assert len(check.per_output) == 1 + len(grad_inputs(graph)) == 12


def test_a_wrong_gradient_is_named():
    graph = _graph(*MLP)
    inputs = make_inputs(graph, 0, "cpu", grad=True)
    eager = get_backend("eager").compile_grad(graph, TensorSpec.of_inputs(graph), "cpu", NoOptions())
    outs = eager(*inputs)
    names = step_output_names(graph, True)
    wrong = list(outs)
    k = names.index("grad:ln_w")
    wrong[k] = wrong[k] * 1.01
    refs = reference_outputs(graph, inputs, "cpu", grad=True)
    check = check_outputs(graph, 0, wrong, outs, refs, names=names)
    assert check.verdict.status == "mismatch" and check.verdict.reason.startswith("grad:ln_w: ")
    assert check.worst_output == "grad:ln_w"
    assert [n for n, f in check.per_output.items() if f["status"] != "ok"] == ["grad:ln_w"]
    assert check_outputs(graph, 0, outs, outs, refs, names=names).verdict.status == "ok"


def test_planning_skips_backends_without_a_backward():
    graph = _graph(*MLP)
    for name in ("onnxruntime", "tensorrt", "tritongen"):
        reason = get_backend(name).supports_grad(graph, "cpu", "float32")
        assert reason and reason.startswith(name), reason
    for name in ("eager", "inductor", "xla", "iree", "faulty"):
        assert get_backend(name).supports_grad(graph, "cpu", "float32") is None
