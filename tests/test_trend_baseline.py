"""The dashboard's rule over a series (results/report/trend.py): a breaching point never enters a later
baseline, compile times have an absolute floor, flag text is cut at a word, and only latency points carry the
headline's noise."""
from __future__ import annotations

from bakeoff.results.report.compare import Thresholds
from bakeoff.results.report.trend import COMPILE_ABS_S, Point, clip, flag_series, judge

NOISY = {"headline_quality": "noisy",
         "headline_noise_reasons": ["the backend's headline drifted by 12% across its 39 samples, " * 4]}


def _points(values: list[float], rec: dict | None = None) -> list[Point]:
    return [Point(f"r{i}", i, v, {"driver": "1"}, rec=dict(rec or {})) for i, v in enumerate(values)]


def test_a_persistent_step_stays_flagged_until_values_return():
    seen = [0.405, 0.458, 0.383, 0.587, 0.541, 0.675]  # the nightly headline ms that was forgotten
    judged = judge(_points(seen), "headline_ms")
    assert [p.breach for p in judged] == [False, False, False, True, True, True]
    assert {p.baseline for p in judged[3:]} == {0.405}  # the breaches never raise the baseline
    flag = flag_series(judged)
    assert flag is not None and flag.kind == "regression" and "last 3 runs breach" in flag.text
    recovered = judge(_points(seen + [0.41, 0.40]), "headline_ms")
    assert not recovered[-2].breach and flag_series(recovered) is None  # back within the limit: it counts again
    assert recovered[-1].baseline == 0.458  # the median of all seven before it: the breaches rejoined


def test_compile_times_need_an_absolute_rise():
    assert COMPILE_ABS_S == Thresholds().compile_abs_s  # mirrors compare's floor
    eager = [0.0009, 0.0008, 0.0010, 0.0009, 0.00633, 0.00633]  # eager's first call: milliseconds of jitter
    assert not any(p.breach for p in judge(_points(eager), "compile_s"))
    slow = judge(_points([2.0, 2.1, 1.9, 2.0, 3.0, 3.0]), "compile_s")
    assert flag_series(slow) is not None and flag_series(slow).kind == "regression"


def test_flag_text_is_cut_at_a_word():
    text = flag_series(judge(_points([1.0, 1.0, 1.0, 1.5], NOISY), "headline_ms")).text
    quoted = text.split("noisy measurement(s): ", 1)[1]
    assert quoted.endswith("…") and len(quoted) <= 160
    assert NOISY["headline_noise_reasons"][0].startswith(quoted[:-1] + " ")  # whole words only
    assert clip("short reason") == "short reason"


def test_only_latency_points_carry_the_headlines_noise():
    compile_flag = flag_series(judge(_points([1.0, 1.0, 1.0, 2.0], NOISY), "compile_s"))
    assert compile_flag is not None and "noisy" not in compile_flag.text
