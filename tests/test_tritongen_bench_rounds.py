"""benchmarks/tritongen_vs_inductor.py times a case's calls in interleaved rounds: on made-up timers, each call's
figure is the median of its rounds, and a clock drifting through the case weighs on every call alike."""
from __future__ import annotations

import pytest

pytest.importorskip("triton")  # the benchmark imports triton.testing.do_bench

from benchmarks import tritongen_vs_inductor as tvi  # noqa: E402


def test_rounds_alternate_the_order_and_take_each_calls_median():
    order: list[str] = []
    ms = {"a": iter([1.0, 9.0, 1.2, 1.1, 1.3]), "b": iter([2.0, 2.2, 2.1, 2.4, 2.3])}

    def bench(call, rep_ms):
        assert rep_ms == 50
        order.append(call)
        return next(ms[call])

    medians, rounds = tvi.interleaved_ms({"a": "a", "b": "b"}, 50, rounds=5, bench=bench)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]  # AB BA AB BA AB
    assert rounds == {"a": [1.0, 9.0, 1.2, 1.1, 1.3], "b": [2.0, 2.2, 2.1, 2.4, 2.3]}
    assert medians == {"a": 1.2, "b": 2.2}  # one disturbed round does not move the median


def test_a_clock_that_drifts_through_the_case_weighs_on_every_call_alike():
    """Three calls of the same cost on a device slowing 2% with every figure taken: timed one after the other each
    reads 2% slower than the one before; in alternating rounds their medians agree within 0.2%."""
    taken = []

    def bench(call, rep_ms):
        taken.append(call)
        return 1.0 * 1.02 ** (len(taken) - 1)

    medians, _ = tvi.interleaved_ms({"first": "x", "second": "y", "third": "z"}, 50, rounds=4, bench=bench)
    assert max(medians.values()) / min(medians.values()) - 1 < 0.002  # one after the other: 2% and 4% apart
