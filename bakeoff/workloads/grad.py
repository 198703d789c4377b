"""The training step of a graph (a workload with `grad: true`): forward and backward of a scalar loss.

    loss = sum over outputs i of sum(output_i * cotangent_i)

The gradient of this loss with respect to an input is the vector-Jacobian product of the outputs with the
cotangents, so every backend computes it as that VJP (torch.autograd.grad with grad_outputs, jax.vjp): no
backend spends time on the loss's own reduction, and all do the same work.

A step's executable takes the graph's inputs followed by one cotangent per output (the output's shape and
dtype) and returns the graph's outputs followed by one gradient per differentiable input (`grad_inputs`, in
graph order). The harness draws the cotangents as it draws the inputs (harness/worker/input_tensors.py), so
they are the same for every backend of a case and every run of a seed. Outputs are named `out0`, `out1`,
... and gradients `grad:<input name>` in records and verdicts (`step_output_names`).
"""
from __future__ import annotations

from bakeoff.workloads.ir import DTYPES, Graph, Node

GRAD_MARKER = "fwd+bwd"


def grad_inputs(graph: Graph) -> tuple[Node, ...]:
    """The inputs a gradient is computed for: every floating input (the IR's inputs are all floating; an
    integer or index input would be left out here)."""
    return tuple(n for n in graph.inputs if n.dtype in DTYPES or n.dtype == "T")


def output_name(index: int) -> str:
    return f"out{index}"


def grad_name(input_name: str) -> str:
    return f"grad:{input_name}"


def step_output_names(graph: Graph, grad: bool) -> list[str]:
    """Names of what a case's executable returns: `out0`... then, for a training step, `grad:<input>`..."""
    names = [output_name(i) for i in range(len(graph.outputs))]
    return names + ([grad_name(n.attr("name")) for n in grad_inputs(graph)] if grad else [])


def step_output_shapes(graph: Graph, grad: bool) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of each of a bound graph's step outputs, in `step_output_names` order."""
    nodes = list(graph.output_nodes) + (list(grad_inputs(graph)) if grad else [])
    return [(tuple(int(d) for d in n.shape), n.dtype) for n in nodes]


def workload_label(workload: str, grad: bool) -> str:
    """How a case's workload is named in ids, records and tables: `mlp_block (fwd+bwd)` for a training step."""
    return f"{workload} ({GRAD_MARKER})" if grad else workload
