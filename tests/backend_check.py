"""Shared by the backend tests: compile one suite workload with a backend and compare with the fp64 reference."""
from __future__ import annotations

import numpy as np
import pytest

from bakeoff.backends import get_backend
from ci_required import skip_or_fail
from bakeoff.backends.base import TensorSpec
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.ir import bind
from bakeoff.workloads.reference import evaluate_reference
from bakeoff.workloads.suite import builtin_workloads

# Relative L2 error against fp64 that a correct backend stays under, per dtype, at smoke sizes.
REL_L2_TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}

WORKLOADS = list(builtin_workloads())

# Backends that `.ci/setup.sh` installs: in CI (BAKEOFF_CI=1) their absence fails instead of skipping.
# TensorRT cannot be installed on our machines and stays a skip everywhere.
INSTALLED_IN_CI = {"eager", "inductor", "tritongen", "xla", "iree", "onnxruntime"}


def smoke_graph(workload: str, dtype: str = "float32"):
    """A built-in workload bound at its smoke preset."""
    w = builtin_workloads()[workload]
    return bind(w.graph, w.presets["smoke"], dtype)


def rel_l2_vs_reference(backend: str, workload: str, dtype: str = "float32", preset: str = "smoke",
                        device: str = "cpu", options: dict | None = None, seed: int = 0) -> float:
    """Worst relative L2 error over the outputs of `backend` on `workload` against the fp64 reference."""
    b = get_backend(backend)
    reason = b.available()
    if reason:
        skip_or_fail(reason) if backend in INSTALLED_IN_CI else pytest.skip(reason)
    w = builtin_workloads()[workload]
    graph = bind(w.graph, w.presets[preset], dtype)
    reason = b.supports(graph, device, dtype)
    if reason:
        pytest.skip(reason)
    inputs = make_inputs(graph, seed, device)
    specs = TensorSpec.of_inputs(graph)
    compiled = b.compile(graph, specs, device, b.parse_options(options))
    outputs = compiled(*inputs)
    refs = evaluate_reference(graph, [x.double().cpu().numpy() for x in inputs])
    worst = 0.0
    assert len(outputs) == len(refs)
    for out, ref in zip(outputs, refs):
        got = out.detach().double().cpu().numpy()
        assert got.shape == ref.shape, (got.shape, ref.shape)
        assert np.isfinite(got).all(), "non-finite output"
        worst = max(worst, float(np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    return worst
