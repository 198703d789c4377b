"""The training step of a torch callable: forward, then torch.autograd.grad of the outputs with the
cotangents (the VJP, workloads/grad.py). Shared by the torch backends (eager, Inductor, the test backend)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from bakeoff.workloads.grad import grad_inputs
from bakeoff.workloads.ir import Graph


def torch_step(forward: Callable[..., Sequence[Any]], graph: Graph,
               on_first: Callable[[Sequence[Any]], None] | None = None) -> Callable[..., tuple]:
    """A function of (inputs..., cotangents...) returning (outputs..., gradients...) for `graph`'s
    differentiable inputs, with `forward` the graph's torch callable. Gradients are materialised (an input
    the outputs do not depend on gets zeros). `on_first(outputs)` sees the first call's forward outputs
    (Inductor checks their grad_fn: the backward it compiled)."""
    import torch

    n_inputs = len(graph.inputs)
    names = {n.attr("name") for n in grad_inputs(graph)}
    wrt = [i for i, n in enumerate(graph.inputs) if n.attr("name") in names]
    first = [on_first]

    def step(*args: Any) -> tuple:
        xs = [a.detach().requires_grad_(i in wrt) for i, a in enumerate(args[:n_inputs])]
        with torch.enable_grad():
            outs = tuple(forward(*xs))
        if first[0] is not None:
            first[0](outs)
            first[0] = None
        grads = torch.autograd.grad(outs, [xs[i] for i in wrt], grad_outputs=list(args[n_inputs:]),
                                    allow_unused=True)
        grads = [torch.zeros_like(xs[i]) if g is None else g for i, g in zip(wrt, grads)]
        return (*(o.detach() for o in outs), *grads)

    return step
