"""`timing.gate: auto` (the default) resolves per case from how its figures are timed (run/gate_policy.py)."""
from __future__ import annotations

import pytest

from bakeoff.backends import backend_class
from bakeoff.harness.config.schema import TimingConfig
from bakeoff.harness.run.gate_policy import resolve_gate_policy

ON = {"profile": True}


def test_device_timed_headlines_keep_the_device_alone_from_other_cases_kernels():
    for name in ("eager", "inductor", "tritongen", "tensorrt"):
        events = backend_class(name).timed_with_events
        assert events, name
        policy, why = resolve_gate_policy("auto", "cuda:0", ON, events, name)
        assert policy == "exclusive" and "CUPTI" in why and "kernels" in why and why.startswith("auto:")


@pytest.mark.parametrize("name", ["xla", "iree", "onnxruntime"])
def test_host_timed_backends_keep_the_device_alone(name):
    events = backend_class(name).timed_with_events
    policy, why = resolve_gate_policy("auto", "cuda:0", ON, events, name)
    assert (policy, events) == ("exclusive", False) and "host clock" in why and name in why


def test_cpu_and_unprofiled_cases_keep_the_device_alone():
    assert resolve_gate_policy("auto", "cpu", ON, True, "eager")[0] == "exclusive"
    policy, why = resolve_gate_policy(None, "cuda:0", {"profile": False}, True, "inductor")
    assert policy == "exclusive" and "pipelined host figure" in why


def test_an_explicit_policy_is_kept_and_a_wrong_one_refused():
    assert resolve_gate_policy("exclusive", "cuda:0", ON, True, "inductor") == ("exclusive", "timing.gate is exclusive")
    assert resolve_gate_policy("timers_only", "cpu", ON, False, "xla")[0] == "timers_only"
    with pytest.raises(ValueError, match="auto, exclusive, timers_only"):
        resolve_gate_policy("sometimes", "cpu", ON, True, "eager")
    assert TimingConfig().gate == "auto"
