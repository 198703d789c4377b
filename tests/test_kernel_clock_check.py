"""benchmarks/kernel_clock_check.py: the in-kernel clock from the programs' stamps, which of the matmul's calls the
pass profiled, and the per-neighbour rows, on made-up stamps and spans (the GPU run is the benchmark itself)."""
from __future__ import annotations

import pytest

from benchmarks import kernel_clock_check as kc


def test_program_clock_is_cycles_over_nanoseconds_and_skips_stalled_timers():
    # 1.98e6 cycles over 1e6 ns: 1980 MHz; a program whose timer did not move gives no reading
    stamps = [(1000, 5_000, 1000 + 1_980_000, 5_000 + 1_000_000), (0, 50, 1_500_000, 50),
              (7, 9, 7 + 1_400_000, 9 + 1_000_000)]
    assert kc.program_mhz(stamps) == pytest.approx([1980.0, 1400.0])


def test_profiled_rows_skip_the_warm_call_and_the_lead_ins():
    # 1 unprofiled call, then 3 groups of 2 lead-ins + the profiled call: calls 3, 6 and 9
    assert kc.profiled_rows(10, 3) == [3, 6, 9]
    # no lead-ins (a long call): every call after the first
    assert kc.profiled_rows(4, 3) == [1, 2, 3]
    with pytest.raises(ValueError, match="equal groups"):
        kc.profiled_rows(9, 3)


def test_rows_put_the_span_in_cycles_by_each_clock_and_the_spread_across_neighbours():
    # the same 2.0 Mcycles kernel at 1980 MHz (tiny) and at 1500 MHz (gemm), the markers reading 1980 in both
    tiny = kc.summarise("tiny", [2.0e3 / 1980] * 3, [1980.0] * 3, [1980.0] * 3, [1980.0, None, 1980.0])
    gemm = kc.summarise("gemm", [2.0e3 / 1500] * 3, [1980.0] * 3, [1500.0] * 3, [1500.0] * 3)
    assert tiny["kernel_mcycles"] == pytest.approx(2.0) == gemm["kernel_mcycles"]
    assert gemm["marker_mcycles"] == pytest.approx(2.0 * 1980 / 1500)
    assert gemm["marker_over_kernel"] == pytest.approx(1980 / 1500 - 1) and tiny["nvml_mhz"] == 1980.0
    assert kc.cycles_spread([tiny, gemm], "kernel_mcycles") == pytest.approx(0.0)
    assert kc.cycles_spread([tiny, gemm], "marker_mcycles") == pytest.approx(1980 / 1500 - 1)
    # a pass without marker clocks: no cycles by the marker, no spread
    none = kc.summarise("copy", [1.0], [], [1900.0], [])
    assert none["marker_mcycles"] is None and kc.cycles_spread([tiny, none], "marker_mcycles") is None
    # a call without an in-kernel reading is left out of the in-kernel figures only
    part = kc.summarise("spin", [1.0, 2.0], [1900.0, 1900.0], [None, 1500.0], [])
    assert part["kernel_mcycles"] == pytest.approx(3.0) and part["marker_mcycles"] == pytest.approx(2.85)


def test_the_spinning_neighbour_is_a_kernel_of_its_own_name():
    # torch.cuda._sleep's kernel is `spin_kernel`, the markers' name: the profile would count its calls as markers
    pytest.importorskip("triton")
    from bakeoff.harness.measure.device_time import MARK_NAME

    assert kc.spinning_kernel().fn.__name__ not in (MARK_NAME, "")


def test_a_failing_neighbour_is_named_and_the_others_still_make_rows(capsys):
    def one(name):
        if name == "spin":
            raise RuntimeError("no spin today")
        return {"neighbour": name}

    rows, failed = kc.each_neighbour(one)
    assert [r["neighbour"] for r in rows] == [n for n in kc.NEIGHBOURS if n != "spin"]
    assert failed == [{"neighbour": "spin", "error": "RuntimeError: no spin today"}]
    assert "spin: RuntimeError: no spin today" in capsys.readouterr().out
