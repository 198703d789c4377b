"""Unit tests of measurement bookkeeping, without a GPU: which method times eager, target names that cannot
collide with labels, profiler failures, kernel counting, warm-run output, out-of-memory evidence, ceilings."""
import signal
import time
from types import SimpleNamespace

import pytest
import torch

import bakeoff.harness.worker.stages as case_run
from bakeoff.harness.measure.figures import BACKEND_TARGET, latency_fields
import bakeoff.harness.supervise.case_process as execute
from bakeoff.harness.measure.environment import environment, fingerprint
from bakeoff.results.hardware import hardware_id
from bakeoff.harness.plan.cases import Case
from bakeoff.harness.measure.timing import Stats, TimedCall, is_kernel_event, measure


class _Compiled:
    """A stand-in executable whose run takes `seconds` (busy wait) and returns its tag."""

    def __init__(self, tag: str, seconds: float = 0.0) -> None:
        self.tag, self.seconds, self.calls = tag, seconds, 0

    def run(self, prepared):
        self.calls += 1
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            pass
        return self.tag

    def sync(self) -> None:
        pass


class HostTimedBackend:  # like XLA, IREE, ONNX Runtime
    timed_with_events = False
    graph_capturable = False


class EventTimedBackend:  # like Inductor, tritongen, TensorRT
    timed_with_events = True
    graph_capturable = True


def _case(label: str, adapter: str, device: str = "cpu", **timing) -> SimpleNamespace:
    t = {"warmup_s": 0.0, "budget_s": 0.2, "min_reps": 5, "max_reps": 15, "target_iqr": 1e-9, "flush_l2": False,
         "cuda_graph": False, "profile": True, **timing}
    return SimpleNamespace(label=label, backend=adapter, device=device, timing=t, bytes_moved=1 << 20)


@pytest.mark.parametrize("backend_cls, events", [(HostTimedBackend, False), (EventTimedBackend, True)])
def test_eager_is_timed_by_the_method_of_its_backend(backend_cls, events):
    targets = case_run.timing_targets(_case("xla", "xla"), backend_cls(), _Compiled("b"), None, _Compiled("e"), None)
    assert [t.events for t in targets] == [events, events]
    assert targets[0].call() == "b" and targets[1].call() == "e"


def test_eager_case_has_one_target():
    targets = case_run.timing_targets(_case("eager", "eager"), EventTimedBackend(), _Compiled("b"), None,
                                      _Compiled("e"), None)
    assert len(targets) == 1 and targets[0].events


def test_label_eager_for_another_adapter_keeps_both_targets_apart():
    # A config label "eager" that runs Inductor: its target and eager's reference must not share a name.
    backend, eager = _Compiled("backend", 0.002), _Compiled("eager", 0.006)
    targets = case_run.timing_targets(_case("eager", "inductor"), HostTimedBackend(), backend, None, eager, None)
    assert len({t.name for t in targets}) == 2
    results = measure(targets, "cpu", warmup_s=0.0, budget_s=0.5, min_reps=5, max_reps=15, target_iqr=1e-9,
                      flush_l2=False)
    out = latency_fields(results, targets)
    assert 2.0 <= out["latency_ms_median"] < 5.0  # the backend's own (2 ms), not eager's (6 ms)
    assert out["eager_latency_ms_median"] >= 6.0
    assert out["timer_speedup_vs_eager"] == pytest.approx(out["eager_latency_ms_median"] / out["latency_ms_median"])
    assert out["timer_speedup_vs_eager"] > 1.5
    assert out["samples_ms"] == targets[0].samples_ms and out["eager_samples_ms"] == targets[1].samples_ms
    assert out["eager_timing_method"] == out["timing_method"] == "host-clock+sync"


def test_eager_case_reports_its_own_latency_as_eager():
    target = TimedCall(BACKEND_TARGET, lambda: None, lambda: None)
    stats = Stats(1.0, 0.9, 1.1, 0.1, 1.0, 0.9, 5, "m")
    out = latency_fields({BACKEND_TARGET: stats}, [target])
    assert out["timer_speedup_vs_eager"] == 1.0 and out["eager_timing_method"] == "m"


def test_profiler_failure_keeps_the_case(monkeypatch):
    import bakeoff.harness.measure.figures as figures

    stats = Stats(1.0, 0.9, 1.1, 0.1, 1.0, 0.9, 5, "host-clock+sync")
    monkeypatch.setattr(figures, "measure", lambda targets, *a, **k: {t.name: stats for t in targets})
    monkeypatch.setattr(figures, "host_latency", lambda *a, **k: stats)
    monkeypatch.setattr(figures, "pipelined_latency", lambda *a, **k: Stats(0.8, 0.7, 0.9, 0.1, 0.8, 0.7, 5, "p"))

    def broken(*a, **k):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(figures, "run_pass", broken)
    monkeypatch.setattr(figures, "sustain_load", lambda targets, seconds, device: seconds)  # no GPU here
    out = case_run.collect_all(_case("iree", "iree", device="cuda"), HostTimedBackend(), _Compiled("b"), None,
                                _Compiled("e"), None)()
    assert out["latency_ms_median"] == 1.0
    assert "CUPTI_ERROR_NOT_INITIALIZED" in out["profile_error"] and "kernel_count" not in out
    # The headline falls back to the pipelined figure, for the backend and eager alike, and says why.
    assert out["headline_ms"] == 0.8 and out["headline_method"] == "p" and out["speedup_vs_eager"] == 1.0
    assert "CUPTI_ERROR_NOT_INITIALIZED" in out["headline_fallback"]


def _event(name, activity=None, device=True, annotation=False):
    from torch.autograd import DeviceType

    evt = SimpleNamespace(name=name, device_type=DeviceType.CUDA if device else DeviceType.CPU,
                          is_user_annotation=annotation)
    if activity is not None:
        evt.activity_type = activity
    return evt


def test_only_kernels_count_as_kernels():
    # torch 2.13 exposes Kineto's activity type; older events are told apart by name.
    assert is_kernel_event(_event("void at::native::vectorized_elementwise_kernel<4>", "kernel"))
    assert not is_kernel_event(_event("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy"))
    assert not is_kernel_event(_event("Memset (Device)", "gpu_memset"))
    assert not is_kernel_event(_event("## forward ##", "gpu_user_annotation"))
    assert is_kernel_event(_event("triton_poi_fused_add_0"))
    assert not is_kernel_event(_event("Memcpy DtoD (Device -> Device)"))
    assert not is_kernel_event(_event("Memset (Device)"))
    assert not is_kernel_event(_event("CompiledFunction", annotation=True))
    assert not is_kernel_event(_event("aten::add", device=False))


def test_sigkill_is_oom_only_with_evidence():
    kill = -int(signal.SIGKILL)
    plain = execute._death_record(kill, "cold", "", {"cgroup": 3, "system": 7}, {"cgroup": 3, "system": 7})
    assert plain["status"] == "crash" and "killed by SIGKILL" in plain["reason"]
    oom = execute._death_record(kill, "cold", "", {"cgroup": 3, "system": 7}, {"cgroup": 4, "system": 8})
    assert oom["status"] == "oom" and "cgroup oom_kill 3 -> 4" in oom["reason"]
    stopped = execute._death_record(kill, "cold", "", {"system": 1}, {"system": 2}, killed_by_harness=True)
    assert stopped["status"] == "crash"
    capped = execute._death_record(1, "cold", "Traceback ...\nMemoryError\n")  # the host memory cap
    assert capped["status"] == "oom"
    assert execute._death_record(-int(signal.SIGSEGV), "cold", "")["status"] == "crash"


def test_oom_kill_counters_are_read_where_linux_has_them():
    counts = execute.oom_kill_counts()
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())
    assert set(counts) <= {"cgroup", "system"}


def test_warm_run_keeps_the_cold_stderr_tail(monkeypatch, tmp_path):
    case = Case(case_id="w/M=1/float32/inductor", workload="w", preset="smoke", shape="M=1", dims={"M": 1},
                dtype="float32", label="inductor", device="cpu", graph={}, options={}, seeds=(0,), timing={},
                timeout_s=10, warm_compile=True, flops=1, bytes_moved=1)
    phases = {"cold": {"status": "ok", "stderr_tail": "cold warning"},
              "warm": {"compile_warm_s": 0.5, "stderr_tail": "warm warning"}}
    monkeypatch.setattr(execute, "_worker_env", lambda *a, **k: {})
    monkeypatch.setattr(execute, "_run_worker",
                        lambda case, phase, *a: execute.WorkerRun(dict(phases[phase]), {"compile": 0.1}, "fresh"))
    record = execute.execute_case(case, tmp_path)
    assert record["stderr_tail"] == "cold warning" and record["stderr_tail_warm"] == "warm warning"
    assert record["compile_warm_s"] == 0.5


def test_hardware_id_ignores_software_and_commits():
    env = environment("cpu")
    assert env["hardware_id"] == hardware_id(env)
    newer = dict(env, harness_rev="deadbeef+dirty", versions={**env["versions"], "torch": "9.9"}, python="3.99")
    assert fingerprint(newer) != env["fingerprint"] and hardware_id(newer) == hardware_id(env)
    gpu = {"device": "cuda:0", "gpu_name": "NVIDIA H200", "gpu_memory_mb": 143771, "sm_count": 132,
           "compute_capability": "9.0", "driver": "570.1", "cpu_model": "x"}
    assert hardware_id(gpu) == hardware_id(dict(gpu, device="cuda:3", driver="580.2", harness_rev="z"))
    assert hardware_id(gpu) != hardware_id(dict(gpu, sm_count=114))
    assert hardware_id(gpu) != hardware_id(env)


def test_ceilings_are_found_after_a_new_commit(tmp_path):
    from bakeoff.results.store import Store

    store = Store(f"sqlite:///{tmp_path / 'c.db'}")
    env = environment("cpu")
    store.add_ceilings(env["fingerprint"], "cpu", [("copy_gbps", 10.0, "GB/s", "m")], env)
    other_machine = dict(env, cpu_model="another CPU", fingerprint="000000000000")
    store.add_ceilings(other_machine["fingerprint"], "cpu", [("copy_gbps", 99.0, "GB/s", "m")], other_machine)
    after_commit = dict(env, harness_rev="feedface", versions={**env["versions"], "numpy": "0.1"})
    after_commit["fingerprint"] = fingerprint(after_commit)
    assert after_commit["fingerprint"] != env["fingerprint"]
    assert store.latest_ceilings(after_commit) == {"copy_gbps": 10.0}
    store.add_ceilings(after_commit["fingerprint"], "cpu", [("copy_gbps", 11.0, "GB/s", "m")], after_commit)
    assert store.latest_ceilings(env) == {"copy_gbps": 11.0}  # the newest on this hardware


def _costed_case(workload: str, dims: dict, dtype: str = "float32") -> SimpleNamespace:
    from bakeoff.workloads import costs
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.suite import builtin_workloads

    graph = bind(builtin_workloads()[workload].graph, dims, dtype)
    return SimpleNamespace(dtype=dtype, flops=costs.flops(graph), bytes_moved=costs.min_bytes(graph),
                           bound_graph=lambda: graph, kind=costs.bound_kind(graph))


def test_compute_bound_case_is_not_held_against_copy_bandwidth():
    from bakeoff.harness.run.assemble import ceiling_for as _ceiling_for

    gemm = _costed_case("gemm_bias_gelu", {"M": 2048, "N": 2048, "K": 2048})
    ew = _costed_case("ew_sigmoid_relu", {"M": 2048, "N": 2048})
    assert gemm.kind == "compute" and ew.kind == "memory"
    assert _ceiling_for(gemm, {"copy_gbps": 100.0}) is None
    assert _ceiling_for(ew, {"copy_gbps": 100.0}) == ("copy_gbps", 100.0)
    assert _ceiling_for(gemm, {"matmul_tflops_float32": 5.0}) == ("matmul_tflops_float32", 5.0)
    assert _ceiling_for(ew, {"matmul_tflops_float32": 5.0}) is None
    both = {"copy_gbps": 100.0, "matmul_tflops_float32": 5.0}
    assert _ceiling_for(gemm, both)[0] == "matmul_tflops_float32" and _ceiling_for(ew, both)[0] == "copy_gbps"


def test_spoil_overwrites_eager_outputs_but_never_inputs():
    x = torch.randn(4, 3)
    out = torch.sigmoid(x)
    case_run.spoil([out, x], [x])
    assert torch.isnan(out).all() and not torch.isnan(x).any()
