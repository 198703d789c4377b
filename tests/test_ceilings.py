"""Ceilings that are ceilings: the best of several candidates, the datasheet's peak beside it, and no case
shown above 100% of a measured ceiling (capped, flagged, the raw share kept)."""
import pytest

from bakeoff.harness.measure import calibrate
from bakeoff.harness.measure.calibrate import Candidate, best_of, matmul_candidates
from bakeoff.harness.measure.ceiling_share import ceiling_fields
from bakeoff.harness.measure.spec_peaks import spec_ceilings, spec_peak


def test_the_ceiling_is_the_best_candidate_and_the_method_names_all_of_them(monkeypatch):
    # The timer is stood in for (each candidate's call "takes" what its label says): what is tested is the choice
    # and the method's words, not how long a sleep takes on a loaded machine.
    def broken():
        raise RuntimeError("no such kernel")

    def fake_time_ms(call, device, budget_s):
        call()
        return {"slow": 4.0, "fast": 1.0}[call.__name__], "fake timer"

    def named(name):
        f = lambda: None  # noqa: E731
        f.__name__ = name
        return f

    monkeypatch.setattr(calibrate, "_time_ms", fake_time_ms)
    cands = [Candidate("slow", named("slow"), 4e-3), Candidate("fast", named("fast"), 4e-3),
             Candidate("broken", broken, 1.0)]
    rate, method = best_of(iter(cands), "cpu", 0.05, 1.0)
    assert rate == pytest.approx(4.0)  # 4e-3 units of work in 1 ms: 4 units/s, and the fast one wins
    assert method.startswith("best of 2: fast (fake timer)") and "others: slow 1" in method
    assert "failed: broken: RuntimeError: no such kernel" in method
    assert best_of(iter([Candidate("broken", broken, 1.0)]), "cpu", 0.05, 1.0) is None


def test_matmul_candidates_cover_shapes_and_layouts_on_the_cpu():
    labels = [c.label for c in matmul_candidates("cpu", "float32")]
    assert len(labels) == len(set(labels)) >= 6
    assert {lbl.split()[-1] for lbl in labels} == {"NN", "NT", "TN"}
    assert len({lbl.split()[-2] for lbl in labels}) >= 2


def test_spec_peaks_of_known_gpus_and_none_for_others():
    assert spec_peak("NVIDIA H200").product == "NVIDIA H200 SXM"
    assert spec_peak("NVIDIA H200 NVL").product == "NVIDIA H200 NVL"
    assert spec_peak("NVIDIA H100 80GB HBM3").matmul_tflops["bfloat16"] == 989.4
    assert spec_peak("NVIDIA H100 PCIe").memory_gbps == 2000.0
    assert spec_peak("NVIDIA GeForce GTX 1080") is None and spec_peak(None) is None
    rows = dict((name, value) for name, value, _, _ in spec_ceilings("NVIDIA H200", ["bfloat16", "float32"]))
    assert rows == {"spec_copy_gbps": 4800.0, "spec_matmul_tflops_bfloat16": 989.4, "spec_matmul_tflops_float32": 67.0}
    assert spec_ceilings("Some Future GPU", ["bfloat16"]) == []


def test_a_case_above_the_measured_ceiling_is_capped_and_flagged():
    ceilings = {"matmul_tflops_bfloat16": 680.0, "spec_matmul_tflops_bfloat16": 989.4}
    over = ceiling_fields({"achieved_tflops": 720.0}, ("matmul_tflops_bfloat16", 680.0), ceilings)
    assert over["pct_of_ceiling"] == 100.0 and over["ceiling_exceeded"] is True
    assert over["pct_of_ceiling_measured"] == pytest.approx(100 * 720 / 680)
    assert over["ceiling"] == {"name": "matmul_tflops_bfloat16", "value": 680.0, "raised_to": 720.0}
    assert over["pct_of_spec_peak"] == pytest.approx(100 * 720 / 989.4)
    under = ceiling_fields({"achieved_gbps": 2000.0}, ("copy_gbps", 4000.0), {"copy_gbps": 4000.0})
    assert under["pct_of_ceiling"] == pytest.approx(50.0) and under["ceiling_exceeded"] is False
    assert "raised_to" not in under["ceiling"] and "pct_of_spec_peak" not in under
    assert ceiling_fields({}, ("copy_gbps", 4000.0), {}) == {}


def test_the_report_marks_a_case_that_beat_the_calibrated_ceiling():
    from bakeoff.results.report.report_tables import _pct

    cell = _pct({"pct_of_ceiling": 100.0, "ceiling_exceeded": True, "pct_of_ceiling_measured": 106.0})
    assert "⚑" in cell.text and "106.0% of the calibrated ceiling" in cell.text
    assert _pct({"pct_of_ceiling": 42.0}).text == "42.0%"
