"""On a GPU: the profiled pass counts kernels only (not the copies inside a call), and eager paired with a
host-timed backend is itself host-timed."""
import time

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_profile_counts_kernels_not_copies():
    from bakeoff.harness.measure.device_time import profile_device_time
    from bakeoff.harness.measure.timing import TimedCall, is_kernel_event

    host = torch.randn(1 << 20).pin_memory()
    a = torch.randn(1 << 20, device="cuda")

    def call():
        upload = host.to("cuda", non_blocking=True)  # a host-to-device copy: CUPTI sees a Memcpy, not a kernel
        return a + upload  # one elementwise kernel

    figs = profile_device_time([TimedCall("t", call, torch.cuda.synchronize)], "cuda", 5, True)["t"]
    assert figs.kernel_count == 1 and figs.kernel_sum.median_ms > 0 and figs.span.n == 5
    assert figs.span.median_ms == pytest.approx(figs.kernel_sum.median_ms)  # one kernel: span = its duration
    (kernel,) = figs.kernel_times  # the one kernel, by name, with its share of the call
    assert "elementwise" in kernel["name"] and kernel["launches"] == 1.0
    assert kernel["share"] == pytest.approx(1.0) and kernel["device_ms"] == pytest.approx(figs.kernel_sum.median_ms, rel=0.2)

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    seen = [(e.name, getattr(e, "activity_type", None), is_kernel_event(e)) for e in prof.events()
            if e.device_type == torch.autograd.DeviceType.CUDA]
    print(torch.__version__, seen)
    assert any(name.lower().startswith("memcpy") and not kernel for name, _, kernel in seen)
    assert sum(kernel for *_, kernel in seen) == 1


def test_eager_beside_a_host_timed_backend_is_host_timed_on_a_gpu():
    from bakeoff.harness.measure.timing import TimedCall, measure

    a = torch.randn(1 << 22, device="cuda")
    targets = [TimedCall("backend", lambda: a * 2, torch.cuda.synchronize, False),
               TimedCall("eager (reference)", lambda: a + 1, torch.cuda.synchronize, False)]
    results = measure(targets, "cuda", warmup_s=0.01, budget_s=0.1, min_reps=3, max_reps=20, target_iqr=0.5,
                      flush_l2=True)
    assert {s.method for s in results.values()} == {"host-clock+sync+flush"}


def test_device_span_counts_the_gap_between_kernels_and_the_sum_does_not():
    from bakeoff.harness.measure.device_time import profile_device_time
    from bakeoff.harness.measure.timing import TimedCall

    a = torch.randn(1 << 22, device="cuda")

    def call():
        b = a * 2
        time.sleep(0.002)  # the host launches the second kernel 2 ms later: the device waits
        return b + 1

    figs = profile_device_time([TimedCall("t", call, torch.cuda.synchronize)], "cuda", 5, False)["t"]
    assert figs.kernel_count == 2
    assert figs.span.median_ms >= 2.0 > figs.kernel_sum.median_ms


def test_long_calls_are_profiled_and_replayed_within_the_budget():
    """A call that outlasts the budget gets the minimum number of profiled calls and graph replays, one call
    per graph; a short call keeps ten calls per graph."""
    from bakeoff.harness.measure.device_time import profile_device_time
    from bakeoff.harness.measure.timing import TimedCall, cuda_graph_latency_ms, graph_calls

    # A long matmul (about 10-30 ms in float32 on a recent GPU), not torch.cuda._sleep: a sleep kernel is what the
    # profiled pass uses as its marker between calls, so a call made of one would read as extra markers.
    x = torch.randn(8192, 8192, device="cuda")

    def call():
        torch.mm(x, x)

    figs = profile_device_time([TimedCall("t", call, torch.cuda.synchronize)], "cuda", 20, False,
                               budget_s=0.01, min_calls=4)["t"]
    assert figs.span.n == 4
    single_ms = figs.span.median_ms
    assert graph_calls(single_ms) == 1 and graph_calls(0.05) == 10
    replay = cuda_graph_latency_ms(call, graph_calls(single_ms), budget_s=0.01, min_replays=3)
    assert replay.n == 3 and replay.method == "cuda-graph-replay x1"
    assert replay.median_ms == pytest.approx(single_ms, rel=0.2)


def test_the_pm_sampler_reads_the_clock_of_a_call_that_fills_the_gpu():
    """Where cupti-python is installed, a call that keeps every SM busy for about a millisecond gets its per-call
    clock from the PM sampler over its own span, within what the GPU runs at; the markers' readings stay beside
    it. Not a check of its accuracy: benchmarks/pm_clock_check.py and kernel_clock_check.py set it beside the
    clock a kernel's own programs counted."""
    from bakeoff.harness.measure import pm_sampler
    from bakeoff.harness.measure.device_time import profile_device_time
    from bakeoff.harness.measure.environment import _nvml, _nvml_handle
    from bakeoff.harness.measure.timing import TimedCall

    if pm_sampler.unavailable():
        pytest.skip(pm_sampler.unavailable())
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    figs = profile_device_time([TimedCall("mm", lambda: a @ a, torch.cuda.synchronize)], "cuda", 10, True)["mm"]
    assert figs.span_sm_clock_source == "pm-sampler", figs.span_sm_clock_sampler_error
    assert len(figs.span_sm_clock_mhz) == 10 and all(b and e for b, e in figs.span_sm_clock_edges_mhz)
    nv = _nvml()
    top = nv.nvmlDeviceGetMaxClockInfo(_nvml_handle(nv, 0), nv.NVML_CLOCK_SM) if nv else 3500
    assert all(0.2 * top < c < 1.03 * top for c in figs.span_sm_clock_mhz), (figs.span_sm_clock_mhz, top)


def test_markers_read_the_sm_clock_of_every_call():
    """Every profiled call gets its SM clock from the markers around it, within what the GPU runs at; with a
    near-idle device (a tiny call) the clock holds still, so NVML's reading is good there and the markers' must
    agree with it: a marker whose two spins started unequally warm would read a clock off by a fixed time."""
    from bakeoff.harness.measure.clocks import ClockSampler
    from bakeoff.harness.measure.device_time import profile_device_time
    from bakeoff.harness.measure.environment import _nvml, _nvml_handle
    from bakeoff.harness.measure.timing import TimedCall

    a = torch.randn(1024, device="cuda")
    with ClockSampler("cuda:0") as nvml:
        figs = profile_device_time([TimedCall("t", lambda: a + 1, torch.cuda.synchronize)], "cuda", 10, False)["t"]
    assert figs.span_sm_clock_source == "marker-spin", figs.span_sm_clock_error
    assert len(figs.span_sm_clock_mhz) == 10 and all(b and e for b, e in figs.span_sm_clock_edges_mhz)
    nv = _nvml()
    if nv is None or not nvml.samples_mhz:
        pytest.skip("no NVML reading to compare with")
    top = nv.nvmlDeviceGetMaxClockInfo(_nvml_handle(nv, 0), nv.NVML_CLOCK_SM)
    assert all(0.2 * top < c < 1.03 * top for c in figs.span_sm_clock_mhz), (figs.span_sm_clock_mhz, top)
    median = sorted(figs.span_sm_clock_mhz)[5]
    assert median == pytest.approx(sorted(nvml.samples_mhz)[len(nvml.samples_mhz) // 2], rel=0.03)
