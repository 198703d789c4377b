"""`timing.gate: auto` (the default) resolves per case from how its figures are timed (supervise/gate_policy.py)."""
from __future__ import annotations

import pytest

from bakeoff.backends import backend_class
from bakeoff.harness.config.schema import TimingConfig
from bakeoff.harness.supervise.gate_policy import resolve_gate_policy

ON = {"profile": True}


def test_on_a_gpu_auto_times_beside_host_compiles_and_says_why():
    for name in ("eager", "inductor", "tritongen", "tensorrt"):
        cls = backend_class(name)
        assert cls.timed_with_events, name
        policy, why = resolve_gate_policy("auto", "cuda:0", ON, True, name, cls.compile_times_on_device(cls.Options()))
        assert policy == "beside_compiles" and "CUPTI" in why and why.startswith("auto:"), why
        assert "host clock" not in why


@pytest.mark.parametrize("name", ["xla", "iree", "onnxruntime"])
def test_host_timed_backends_say_their_timer_reads_the_host_clock(name):
    cls = backend_class(name)
    policy, why = resolve_gate_policy("auto", "cuda:0", ON, cls.timed_with_events, name,
                                      cls.compile_times_on_device(cls.Options()))
    assert (policy, cls.timed_with_events) == ("beside_compiles", False) and "host clock" in why and name in why


@pytest.mark.parametrize("name, options, device_timing", [
    ("eager", {}, False), ("inductor", {}, False), ("inductor", {"mode": "reduce-overhead"}, False),
    ("inductor", {"mode": "max-autotune"}, True), ("inductor", {"options": {"max_autotune": True}}, True),
    ("tritongen", {}, True), ("tritongen", {"autotune": False}, False), ("xla", {}, True),
    ("xla", {"xla_flags": "--xla_gpu_autotune_level=0"}, False), ("iree", {}, False),
    ("onnxruntime", {}, False), ("tensorrt", {}, True)])
def test_a_compile_that_times_on_the_device_holds_the_gate_and_the_reason_says_so(name, options, device_timing):
    cls = backend_class(name)
    reason = cls.compile_times_on_device(cls.parse_options(options))
    assert (reason is not None) == device_timing, (name, options, reason)
    why = resolve_gate_policy("auto", "cuda:0", ON, cls.timed_with_events, name, reason)[1]
    assert ("its own compile holds the gate" in why) == device_timing


def test_cpu_and_unprofiled_cases_keep_the_device_alone():
    assert resolve_gate_policy("auto", "cpu", ON, True, "eager")[0] == "exclusive"
    policy, why = resolve_gate_policy(None, "cuda:0", {"profile": False}, True, "inductor")
    assert policy == "exclusive" and "pipelined host figure" in why


def test_an_explicit_policy_is_kept_and_a_wrong_one_refused():
    assert resolve_gate_policy("exclusive", "cuda:0", ON, True, "inductor") == ("exclusive", "timing.gate is exclusive")
    assert resolve_gate_policy("timers_only", "cpu", ON, False, "xla")[0] == "timers_only"
    with pytest.raises(ValueError, match="auto, exclusive, timers_only, beside_compiles"):
        resolve_gate_policy("sometimes", "cpu", ON, True, "eager")
    assert TimingConfig().gate == "auto"


@pytest.mark.parametrize("workload, tuned", [
    ("ew_sigmoid_relu", False), ("ew_gelu_silu_gate", False), ("layernorm_gelu", True), ("softmax", True),
    ("gemm_bias_gelu", True), ("attention", True), ("mlp_block", True)])
def test_xla_holds_the_gate_only_for_graphs_its_autotuner_has_something_to_time_in(workload, tuned):
    """XLA tunes GEMMs, convolutions and fused attention; an elementwise forward graph (and the process
    warm-up's tiny graph, for every case) compiles beside timers, a training step or a reduction keeps the gate."""
    from bakeoff.harness.worker.process_setup import setup_graph_for
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.suite import builtin_workloads

    xla = backend_class("xla")
    w = builtin_workloads()[workload]
    graph = bind(w.graph, w.presets["smoke"], "bfloat16")
    defaults = xla.Options()
    assert (xla.graph_compile_times_on_device(graph, defaults) is not None) == tuned, workload
    assert xla.graph_compile_times_on_device(graph, defaults, grad=True) is not None  # backward: reductions, GEMMs
    assert xla.graph_compile_times_on_device(setup_graph_for(graph), defaults) is None
    # Other backends decide by their options alone, whatever the graph.
    for name in ("tritongen", "inductor", "iree"):
        cls = backend_class(name)
        assert cls.graph_compile_times_on_device(graph, cls.Options()) == cls.compile_times_on_device(cls.Options())
