"""Correct outputs still pass: every built-in workload on eager and Inductor (CPU, smoke sizes) in float16 and
bfloat16, two seeds, through check_outputs (float32 is covered by the smoke run through the CLI). A rule that
rejected a correct backend would show here; benchmarks/verdict_margins.py prints how close each comes."""
from __future__ import annotations

import pytest

from bakeoff.backends import get_backend
from bakeoff.backends.options import NoOptions
from bakeoff.backends.base import TensorSpec
from bakeoff.harness.measure.checks import check_outputs, reference_outputs
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads


@pytest.fixture(autouse=True)
def _own_inductor_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_every_builtin_workload_passes(backend, dtype):
    failed = []
    for name, w in builtin_workloads().items():
        graph = bind(w.graph, w.presets["smoke"], dtype)
        specs = TensorSpec.of_inputs(graph)
        eager = get_backend("eager").compile(graph, specs, "cpu", NoOptions())
        compiled = get_backend(backend).compile(graph, specs, "cpu", get_backend(backend).Options())
        for seed in (0, 1):
            inputs = make_inputs(graph, seed, "cpu")
            check = check_outputs(graph, seed, compiled(*inputs), eager(*inputs), reference_outputs(graph, inputs, "cpu"))
            if check.verdict.status != "ok":
                failed.append((name, seed, check.verdict.reason))
    assert failed == []
