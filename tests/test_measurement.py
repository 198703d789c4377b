"""The timer's statistics, the numeric verdict on crafted outputs, ULP distance, and the environment."""
import math
import time

import numpy as np
import pytest
import torch

from bakeoff.harness.measure.environment import environment, fingerprint
from bakeoff.harness.measure.numerics import error_stats, ulp_distance, verdict
from bakeoff.harness.measure.timing import TimedCall, measure, stats


def test_stats_of_known_samples():
    s = stats([1.0, 2.0, 3.0, 4.0, 5.0], "m")
    assert s.median_ms == 3.0 and s.n == 5 and s.min_ms == 1.0 and s.mean_ms == 3.0
    assert s.p20_ms == pytest.approx(1.8) and s.p80_ms == pytest.approx(4.2)
    assert s.iqr_rel == pytest.approx((4.0 - 2.0) / 3.0)


def _busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_timer_measures_a_function_of_known_duration():
    # 2 ms in the call and 2 ms in sync(): a sample must span both (sync is inside the timed region).
    target = TimedCall("wait", lambda: _busy_wait(0.002), lambda: _busy_wait(0.002))
    result = measure([target], "cpu", warmup_s=0.01, budget_s=0.3, min_reps=10, max_reps=1000,
                     target_iqr=0.05, flush_l2=False)["wait"]
    assert result.n >= 10 and len(target.samples_ms) == result.n
    # Never faster than 4 ms; preemption on a loaded machine only adds, so the fastest sample is close.
    assert 4.0 <= result.min_ms < 4.0 * 1.25
    assert 4.0 <= result.p20_ms <= result.median_ms <= result.p80_ms
    assert result.method == "host-clock+sync"


def test_timer_interleaves_targets_and_stops_at_max_reps():
    order = []
    a = TimedCall("a", lambda: order.append("a"), lambda: None)
    b = TimedCall("b", lambda: order.append("b"), lambda: None)
    measure([a, b], "cpu", warmup_s=0.0, budget_s=10.0, min_reps=3, max_reps=7, target_iqr=1e-9, flush_l2=True)
    assert len(a.samples_ms) == len(b.samples_ms) == 7
    timed = order[-14:]
    assert timed == ["a", "b"] * 7  # A, B, A, B: drift hits both


def _ref(n=4096, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(n))


def test_verdict_on_crafted_outputs():
    ref = _ref()
    eager = ref.to(torch.float32)
    eager_stats = error_stats(eager, ref)
    ok = verdict(error_stats(eager.clone(), ref), eager_stats, torch.float32)
    assert ok.status == "ok" and ok.err_ratio_vs_eager == pytest.approx(1.0)

    zeros = verdict(error_stats(torch.zeros_like(eager), ref), eager_stats, torch.float32)
    assert zeros.status == "mismatch"

    nan = eager.clone()
    nan[7] = float("nan")
    v = verdict(error_stats(nan, ref), eager_stats, torch.float32)
    assert v.status == "mismatch" and "non-finite" in v.reason

    perturbed = eager + 1e-3 * eager.abs().mean() * torch.randn(eager.shape, dtype=torch.float32)
    v = verdict(error_stats(perturbed, ref), eager_stats, torch.float32)
    assert v.status == "mismatch" and v.err_ratio_vs_eager > 2


def test_more_accurate_than_eager_passes_with_ratio_below_one():
    ref = _ref()
    eager16 = ref.to(torch.bfloat16)
    # eager computed badly (an extra bf16 rounding of a scaled copy); the backend rounds once, exactly.
    sloppy = (ref * 1.003).to(torch.bfloat16)
    exact = ref.to(torch.bfloat16)
    v = verdict(error_stats(exact, ref), error_stats(sloppy, ref), torch.bfloat16)
    assert v.status == "ok" and v.err_ratio_vs_eager < 1
    assert error_stats(eager16, ref).ulp_max <= 1  # round-to-nearest is within half an ULP, at most 1 here


def test_rmse_multiplier_admits_error_within_m_times_eager():
    ref = _ref()
    noise = torch.from_numpy(np.random.default_rng(1).standard_normal(ref.shape[0]))
    eager = (ref + 1e-3 * noise).to(torch.float16)
    backend = (ref + 2.5e-3 * noise).to(torch.float16)  # 2.5x eager's error: fp16 allows 3x
    v = verdict(error_stats(backend, ref), error_stats(eager, ref), torch.float16)
    assert v.status == "ok" and 2 < v.err_ratio_vs_eager < 3
    worse = (ref + 4e-3 * noise).to(torch.float16)
    assert verdict(error_stats(worse, ref), error_stats(eager, ref), torch.float16).status == "mismatch"


def test_ulp_distance_counts_representable_steps_across_zero():
    x = torch.tensor([1.0, -0.0, 0.0], dtype=torch.float32)
    nxt = torch.nextafter(x, torch.tensor(math.inf))
    assert ulp_distance(nxt, x.double()).tolist() == [1, 1, 1]
    neg = torch.tensor([-1e-45], dtype=torch.float32)  # the smallest negative subnormal to +0: 1 step
    assert ulp_distance(neg, torch.zeros(1, dtype=torch.float64)).tolist() == [1]
    h = torch.tensor([1.0], dtype=torch.bfloat16)
    assert ulp_distance(torch.nextafter(h, torch.tensor([2.0], dtype=torch.bfloat16)), h.double()).tolist() == [1]


def test_error_stats_fields():
    ref = _ref()
    out = ref.to(torch.float32)
    s = error_stats(out, ref)
    assert s.cosine == pytest.approx(1.0) and s.rel_l2 < 1e-7 and s.within_tol and s.nonfinite == 0
    assert s.ulp_p99 <= s.ulp_max <= 1
    with pytest.raises(ValueError, match="shape"):
        error_stats(out[:-1], ref)


def test_environment_fingerprint_is_stable_and_complete():
    env = environment("cpu")
    for key in ("cpu_model", "python", "versions", "harness_rev", "load_avg", "fingerprint"):
        assert key in env
    for pkg in ("torch", "triton", "jax", "jaxlib", "iree", "onnxruntime", "tensorrt"):
        assert pkg in env["versions"]
    again = dict(env, load_avg=[99.0, 99.0, 99.0])
    assert fingerprint(again) == env["fingerprint"]  # load varies; the fingerprint does not
    assert fingerprint(dict(env, versions={**env["versions"], "torch": "0.0"})) != env["fingerprint"]


def test_graph_calls_hold_about_two_ms_of_work():
    from bakeoff.harness.measure.timing import graph_calls

    assert [graph_calls(ms) for ms in (0.01, 0.2, 0.5, 1.0, 1.9, 2.0, 86.0)] == [10, 10, 4, 2, 1, 1, 1]
    assert graph_calls(0.0) == 10 and graph_calls(float("nan")) == 10  # no timer figure: the old ten


class _FakeDevice:
    """A stand-in for torch.cuda in timing.py: a log of what was enqueued and read, and a device that is either
    always behind the host (device-bound: nothing completes until waited for) or always caught up."""

    def __init__(self, caught_up: bool) -> None:
        self.caught_up, self.log, self.recorded = caught_up, [], []
        device = self

        class Event:
            def __init__(self, enable_timing: bool = False) -> None:
                self.done = False

            def record(self) -> None:
                device.recorded.append(self)

            def query(self) -> bool:
                return self.done or device.caught_up

            def synchronize(self) -> None:
                device.log.append("wait")
                for e in device.recorded[:device.recorded.index(self) + 1]:
                    e.done = True

            def elapsed_time(self, end: "Event") -> float:
                return 1.0

        self.Event = Event

    def _sleep(self, cycles: int) -> None:
        self.log.append("spin")

    def synchronize(self) -> None:
        for e in self.recorded:
            e.done = True


@pytest.mark.parametrize("caught_up", [False, True])
def test_event_batches_run_back_to_back_and_spin_only_when_the_device_caught_up(monkeypatch, caught_up):
    from bakeoff.harness.measure import timing

    fake = _FakeDevice(caught_up)
    monkeypatch.setattr(timing.torch, "cuda", fake)
    t = TimedCall("t", lambda: fake.log.append("call"), lambda: None, events=True)
    batches = timing.EventBatches()
    for _ in range(4):
        batches.add(t, timing.CacheFlusher("cpu", False), 3)
    batches.finish([t])
    assert len(t.samples_ms) == 12
    # the next batch is enqueued before the one before it is read: the device never waits for the host's read
    first_read = fake.log.index("wait")
    assert fake.log[:first_read].count("call") == 6  # batches 1 and 2 enqueued, then batch 1 read
    assert batches.spins == (4 if caught_up else 1)  # a device-bound call: only the first batch waits behind a spin
