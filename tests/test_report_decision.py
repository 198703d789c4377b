"""The decision the report leads with: the speedup's 95% interval (paired bootstrap), ties inside it, the
scoreboard, and the page in Chromium: the first screen holds the scoreboard and the heatmap, the rest is folded."""
from __future__ import annotations

import random
import zlib

import pytest

from browser import open_browser
from bakeoff.results.record import CaseRecord, ColdOutput
from bakeoff.results.report.data import RunData
from bakeoff.results.report.decision import MIN_WIN_MARGIN_PCT, reason_class, scoreboard, speed_of, verdicts
from bakeoff.results.report.decision_tables import scoreboard_table, verdict_table
from bakeoff.results.report.report import render_report
from bakeoff.results.report.weights import DEFAULT_WEIGHTS, recommend
from bakeoff.results.speedup_interval import case_speedup_interval, interval_fields, speedup_interval


def _pairs(backend_ms: float, eager_ms: float, n: int = 40, jitter: float = 0.02, seed: int = 1):
    rng = random.Random(seed)
    return ([backend_ms * (1 + rng.uniform(-jitter, jitter)) for _ in range(n)],
            [eager_ms * (1 + rng.uniform(-jitter, jitter)) for _ in range(n)])


def test_interval_brackets_the_ratio_of_medians_and_is_reproducible():
    b, e = _pairs(1.0, 2.0)
    low, high = speedup_interval(b, e)
    assert 1.9 < low < 2.0 < high < 2.1
    assert speedup_interval(b, e) == (low, high)  # fixed seed
    wider = speedup_interval(*_pairs(1.0, 2.0, jitter=0.2))
    assert wider[1] - wider[0] > 3 * (high - low)


def test_interval_needs_enough_valid_pairs():
    assert speedup_interval([1.0] * 4, [2.0] * 4) is None
    assert speedup_interval([1.0, None, float("nan"), -1, 1, 1, 1], [2.0] * 7) is None  # 4 valid pairs
    assert speedup_interval([1.0] * 9, [2.0] * 5) == (2.0, 2.0)  # the longer series cut to the shorter


def _case(backend: str, speedup: float, jitter: float = 0.01, *, dtype: str = "float32", workload: str = "w",
          status: str = "ok", **extra):
    # a seed fixed by the case (str's hash() differs from one process to the next)
    b, e = _pairs(1.0 / speedup, 1.0, jitter=jitter, seed=zlib.crc32(f"{backend}/{workload}/{dtype}".encode()) % 1000)
    case = {"workload": workload, "shape": "N=8", "dtype": dtype, "backend": backend, "adapter": backend,
            "status": status, "headline_method": "cupti-span", "device_span_samples_ms": b,
            "eager_device_span_samples_ms": e, "headline_ms": 1.0 / speedup, "eager_headline_ms": 1.0,
            "speedup_vs_eager": speedup if status == "ok" else None, "compile_total_s": 2.0, **extra}
    if backend == "eager":
        case["eager_device_span_samples_ms"] = None
    return case


def test_the_record_carries_the_interval_columns_and_headline_pairs_choose_the_headline_samples():
    case = _case("inductor", 1.5)
    fields = interval_fields(case)
    assert fields["speedup_vs_eager_ci_low"] < 1.5 < fields["speedup_vs_eager_ci_high"]
    written = ColdOutput.model_validate({"status": "ok", **fields}).model_dump()  # what the worker writes
    assert written["speedup_vs_eager_ci_low"] == fields["speedup_vs_eager_ci_low"]
    assert "speedup_vs_eager_ci_high" in CaseRecord.export_columns()
    pipelined = {**case, "headline_method": "pipelined"}
    assert case_speedup_interval(pipelined) is None
    timer = {**case, "headline_method": "host-clock+sync", "timing_method": "host-clock+sync",
             "samples_ms": case["device_span_samples_ms"], "eager_samples_ms": case["eager_device_span_samples_ms"]}
    assert case_speedup_interval(timer) == case_speedup_interval(case)


def test_overlapping_intervals_are_a_tie_and_clear_ones_a_win():
    cases = [_case("eager", 1.0), _case("a", 1.50, 0.05), _case("b", 1.49, 0.05),  # tie
             _case("eager", 1.0, workload="v"), _case("a", 2.0, workload="v"), _case("b", 1.5, workload="v"),
             _case("c", 1.0, workload="v", status="compile_error", reason="boom"),
             _case("d", 1.0, workload="v", status="skipped", reason="d not installed (pip install d)")]
    w, v = verdicts([RunData({"run_id": "r"}, cases)])
    assert w.is_tie and w.winner is None and {s.backend for s in w.tied} == {"a", "b"}
    assert not v.is_tie and v.winner.backend == "a" and v.margin == pytest.approx(2.0 / 1.5)
    board = {b.backend: b for b in scoreboard([w, v]).backends}
    assert (board["a"].won, board["a"].tied, board["b"].tied) == (1, 1, 1)
    assert board["c"].failed == {"compile_error": 1} and board["d"].skipped == {"not installed": 1}
    assert board["a"].geomean("float32") == pytest.approx((1.5 * 2.0) ** 0.5)
    # the weighted pick never names a winner inside the noise either
    rec_w = [r for r in recommend(cases, DEFAULT_WEIGHTS) if r.workload == "w"][0]
    assert rec_w.tied_with is not None and rec_w.shown.startswith("tie: ")


def _ci(backend: str, speedup: float, low: float, high: float, workload: str = "w", **extra):
    """A case whose stored 95% interval is [low, high]."""
    return _case(backend, speedup, workload=workload, speedup_vs_eager_ci_low=low, speedup_vs_eager_ci_high=high,
                 **extra)


def test_a_lead_under_the_minimum_margin_is_a_tie_even_when_the_intervals_clear():
    assert MIN_WIN_MARGIN_PCT == 3.0
    cases = [_case("eager", 1.0), _ci("xla", 4.10, 4.09, 4.10), _ci("tritongen", 4.08, 4.08, 4.085),
             _case("eager", 1.0, workload="v"), _ci("xla", 4.25, 4.24, 4.26, "v"),
             _ci("tritongen", 4.08, 4.07, 4.09, "v"),
             _case("eager", 1.0, workload="u"), _ci("xla", 1.30, 1.20, 1.40, "u"),
             _ci("tritongen", 1.10, 1.05, 1.25, "u")]
    close, clear, overlap = verdicts([RunData({"run_id": "r"}, cases)])
    assert close.winner is None and close.text == "tie within 3%: xla, tritongen"
    assert clear.winner.backend == "xla" and clear.text == "xla"  # +4.2%, intervals clear
    assert overlap.winner is None and overlap.text == "tie: xla, tritongen"  # 18% apart, intervals overlap
    board = {b.backend: b for b in scoreboard([close, clear, overlap]).backends}
    assert (board["xla"].won, board["xla"].tied, board["tritongen"].tied) == (1, 2, 2)


def test_eager_the_paired_baseline_takes_part_in_every_verdict():
    # eager is no listed backend here: every speedup is over the eager timed beside each backend
    cases = [_ci("iree", 0.81, 0.80, 0.81, "slow"), _ci("ort", 0.66, 0.66, 0.66, "slow"),
             _ci("xla", 1.01, 0.99, 1.03, "even"), _ci("xla", 0.985, 0.98, 0.99, "close"),
             _ci("xla", 1.50, 1.45, 1.55, "fast")]
    slow, even, close, fast = verdicts([RunData({"run_id": "r"}, cases)])
    assert slow.winner.is_baseline and slow.text == "eager (baseline) fastest"
    assert slow.margin == pytest.approx(1 / 0.81)
    assert even.winner is None and even.text == "not distinguishable from eager: xla"
    assert close.winner is None and close.text == "not distinguishable from eager within 3%: xla"
    assert fast.winner.backend == "xla" and fast.margin == pytest.approx(1.5)
    board = scoreboard([slow, even, close, fast])
    assert "eager" not in {b.backend for b in board.backends}  # the baseline is no backend of the scoreboard
    assert {b.backend: b.won for b in board.backends} == {"xla": 1, "iree": 0, "ort": 0}
    html = verdict_table([slow], [], False)
    assert '<td data-v="eager" class="warn">eager (baseline) fastest</td>' in html
    assert "eager (baseline) 1.00×" in html and "iree 0.81× [0.80–0.81]" in html  # fastest, then the runner-up


def test_a_lead_that_is_eager_s_move_between_cases_is_a_tie():
    """Speedups are over eager timed in each backend's own case: where eager's own headline moved more than
    EAGER_APART_REL between two cases, the faster must also lead by the margin in their own headlines. An H100's
    16-bit RMSNorm: eager 0.107 ms beside tritongen, 0.124 ms beside Inductor; the backends 0.0896 / 0.0916 ms."""
    def rms(backend, own_ms, eager_ms, workload="rmsnorm"):
        sp = eager_ms / own_ms
        return _ci(backend, sp, sp * 0.99, sp * 1.01, workload, headline_ms=own_ms, eager_headline_ms=eager_ms)

    cases = [_case("eager", 1.0, workload="rmsnorm", headline_ms=0.114, eager_headline_ms=0.114),
             rms("tritongen", 0.0896, 0.107), rms("inductor", 0.0916, 0.124),
             # eager moved as much, but the faster also leads in its own headline: a win
             rms("tritongen", 0.070, 0.107, "clear"), rms("inductor", 0.0916, 0.124, "clear"),
             # eager steady: the paired lead stands as before
             rms("tritongen", 0.0896, 0.124, "steady"), rms("inductor", 0.0916, 0.120, "steady")]
    moved, clear, steady = verdicts([RunData({"run_id": "r"}, cases)])
    assert moved.winner is None and moved.text == "tie (eager moved between cases): inductor, tritongen"
    assert {s.backend for s in moved.tied} == {"inductor", "tritongen"}  # eager itself (0.114 ms) is clearly slower
    assert clear.winner is not None and clear.winner.backend == "tritongen"
    assert steady.winner is not None and steady.winner.backend == "tritongen"
    html = verdict_table([moved], [], False)
    assert "headline moved 16% between inductor" in html and "cases (0.124 / 0.107 ms)" in html
    assert "their own headlines 0.0916 / 0.0896 ms" in html
    rec = {r.workload: r for r in recommend(cases, DEFAULT_WEIGHTS)}
    assert rec["rmsnorm"].shown == "tie: inductor, tritongen" and "eager's own headline moved" in rec["rmsnorm"].reason
    assert rec["clear"].tied_with is None and rec["steady"].tied_with is None


def test_the_scoreboard_ranks_backends_over_the_cases_all_of_them_passed():
    cases = []
    for wl, a, b in (("w1", 2.0, 1.9), ("w2", 2.0, 1.9), ("w3", 0.25, None)):  # b never ran w3, where a is slow
        cases += [_case("a", a, workload=wl), _case("d", 1.0, workload=wl, status="skipped", reason="no GPU")]
        cases += [_case("b", b, workload=wl)] if b else []
        cases += [_case("c", 1.2, workload=wl, status="ok" if wl != "w3" else "compile_error", reason="boom")]
    cases.append(_case("a", 1.5, workload="w1", dtype="bfloat16"))
    board = scoreboard(verdicts([RunData({"run_id": "r"}, cases)]))
    assert [b.backend for b in board.backends] == ["a", "b", "c", "d"]  # a 2.0 over b 1.9 on w1, w2
    assert board.common == {"float32": {("w1", "N=8"), ("w2", "N=8")}, "bfloat16": {("w1", "N=8")}}
    by = {b.backend: b for b in board.backends}
    assert board.common_geomean(by["a"], "float32") == pytest.approx(2.0)
    assert by["a"].geomean("float32") == pytest.approx(1.0)  # its own cases: (2 · 2 · 0.25)^(1/3)
    assert board.ranked_over == {("float32", ("w1", "N=8")), ("float32", ("w2", "N=8"))}  # b, c ran no bfloat16
    assert by["b"].geomean("float32") == pytest.approx(1.9) and by["b"].lacking == {"float32": {"not run": 1},
                                                                                   "bfloat16": {"not run": 1}}
    assert by["c"].lacking == {"float32": {"failed": 1}, "bfloat16": {"not run": 1}}
    assert by["d"].lacks("float32", "skipped") == 3 and board.common_geomean(by["d"], "float32") is None
    html = scoreboard_table(board, ["float32", "bfloat16"])
    assert "float32 × (2 common)" in html and ">1.90× 2/3: 1 not run<" in html
    assert ">1.00× 3/3<" in html and ">- 0/3: 3 skipped<" in html


def test_an_interval_without_samples_falls_back_to_the_stated_spread_rule():
    case = _case("a", 1.5, headline_p20_ms=0.6, headline_p80_ms=0.7, eager_headline_p20_ms=0.95,
                 eager_headline_p80_ms=1.05)
    case["device_span_samples_ms"] = None
    s = speed_of(case)
    assert s.source == "p20–p80" and s.low == pytest.approx(0.95 / 0.7) and s.high == pytest.approx(1.05 / 0.6)
    stored = speed_of({**case, "speedup_vs_eager_ci_low": 1.4, "speedup_vs_eager_ci_high": 1.6})
    assert (stored.low, stored.high, stored.source) == (1.4, 1.6, "bootstrap (stored)")
    assert reason_class("onnxruntime has no CUDA provider (pip install onnxruntime-gpu)") == "no device support"


def _big_run() -> RunData:
    """11 workloads × 3 dtypes × 6 backends, one always skipped, one failing now and then, noisy cells."""
    cases = []
    for k in range(11):
        for dtype in ("float32", "bfloat16", "float16"):
            wl = f"workload_{k}"
            cases.append(_case("eager", 1.0, dtype=dtype, workload=wl))
            fast = 1.2 + 0.1 * (k % 4)  # xla ties with inductor on every third workload, else wins
            for name, speedup in (("inductor", fast), ("xla", fast * (1.003 if k % 3 == 0 else 1.4)),
                                  ("tritongen", 0.9)):
                cases.append(_case(name, speedup, 0.05, dtype=dtype,
                                   workload=wl, headline_quality="noisy" if k % 4 == 0 else "clean",
                                   headline_noise_reasons=["drift 3%"] if k % 4 == 0 else []))
            cases.append(_case("iree", 0.5, dtype=dtype, workload=wl, status="ok" if k % 5 else "runtime_error",
                               reason=None if k % 5 else "illegal memory access"))
            cases.append(_case("tensorrt", 1.0, dtype=dtype, workload=wl, status="skipped",
                               reason="tensorrt not installed"))
    return RunData({"run_id": "big", "config_name": "c", "status": "complete", "environment": {}}, cases)


def test_report_first_screen_holds_scoreboard_and_heatmap_and_the_rest_is_folded(tmp_path):
    run = _big_run()
    path = tmp_path / "report.html"
    path.write_text(render_report([run], DEFAULT_WEIGHTS, "inline"))
    expected_ties = {f"{v.workload} {v.shape} {v.dtype}" for v in verdicts([run]) if v.is_tie}
    with open_browser() as browser:
        page = browser.open(path, {"#speedup td.hm-cell": 1})
        p = page.page
        assert page.evaluate("typeof Plotly") == "undefined"  # fetched when a chart is first opened
        p.set_viewport_size({"width": 1400, "height": 900})
        p.evaluate("window.scrollTo(0, 0)")
        box = page.evaluate("""(() => { const b = id => document.getElementById(id).getBoundingClientRect().bottom;
            return {score: b('scoreboard'), heat: b('speedup'), height: document.documentElement.scrollHeight,
                    cases_shown: document.getElementById('cases').checkVisibility()}; })()""")
        ties = set(page.evaluate("""[...document.querySelectorAll('#verdicts tbody tr')]
            .filter(r => r.querySelector('td.tie')).map(r => [...r.cells].slice(0, 3).map(c => c.textContent)
            .join(' '))"""))
        assert page.count("#pareto .main-svg") == 0  # folded charts are drawn when opened
        p.click("a.reveal[href='#pareto']")
        p.wait_for_selector("#pareto .main-svg")
        p.click("summary:has-text('Every case')")  # as a user opens the fold
        p.fill("input.filter", "iree runtime_error")
        shown = page.evaluate("[...document.querySelectorAll('#cases tbody tr')].filter(r => r.style.display "
                              "!== 'none').length")
    assert page.errors == [], page.errors
    assert box["score"] <= 900 and box["heat"] <= 900 and box["cases_shown"] is False
    assert box["height"] < 6000
    assert expected_ties and ties == expected_ties
    assert shown == 9  # workloads 0, 5 and 10, three dtypes each
