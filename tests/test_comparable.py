"""Compare what is comparable: every record carries graph, options and timing digests; compare and the
dashboard list pairs whose digests or timing method differ as not comparable (why) and never count them as
regressions, and say why (options equal as stored: the backend's defaults changed); `compare X X` says it
compares a run with itself; noisy cases are marked, and a regression that rests on a noisy headline is suspect,
still counted; the recommendation uses the speedup column's paired figures and says when it rests on noise.
Synthetic stores (made up, tests only, as report_history.py) plus two real CPU runs through the CLI."""
from __future__ import annotations

import json
import random

from conftest import bakeoff
from report_history import environment, record
from bakeoff.harness.plan.digests import case_digests, timing_digest
from bakeoff.results.report.compare import Thresholds, compare_runs
from bakeoff.results.report.data import RunData
from bakeoff.results.report.history import load_history
from bakeoff.results.report.report import render_report
from bakeoff.results.report.weights import DEFAULT_WEIGHTS, recommend
from bakeoff.results.store import Store

KEY = ("gemm_synth", "M=64,N=64,K=64", "bfloat16", "inductor")
EAGER = KEY[:3] + ("eager",)
GRAPH = {"nodes": [{"id": 0, "op": "input"}], "outputs": [0]}
TIMING = {"warmup_s": 0.2, "budget_s": 1.0, "min_reps": 5, "max_reps": 10000, "target_iqr": 0.05, "flush_l2": True,
          "cuda_graph": True, "profile": True}
METHOD = "cuda-events(batch 5 behind a spin kernel)+flush"


def _rec(key=KEY, median_ms=1.0, seed=0, timing=TIMING, options=None, graph=GRAPH, method=METHOD, **fields) -> dict:
    options = {"mode": "default"} if options is None else options
    return (record(key, median_ms, random.Random(seed)) | case_digests(graph, options, timing)
            | {"options": options, "timing_method": method, "seeds": [0, 1]} | fields)


def _run(run_id: str, cases: list[dict]) -> RunData:
    return RunData({"run_id": run_id, "fingerprint": "fp", "environment": environment(0)}, cases)


def _cmp(base: list[dict], cand: list[dict], same_run: bool = False):
    return compare_runs(_run("a", base), _run("a" if same_run else "b", cand), Thresholds())


def test_digests_ignore_the_stopping_rule_only():
    assert timing_digest(TIMING) == timing_digest(TIMING | {"budget_s": 5.0, "min_reps": 50, "target_iqr": 0.01})
    assert timing_digest(TIMING) != timing_digest(TIMING | {"flush_l2": False})
    assert timing_digest(TIMING) != timing_digest(TIMING | {"sustained": True})  # a setting added later counts
    d = case_digests(GRAPH, {"mode": "default"}, TIMING)
    assert d["timing_settings"] == {"cuda_graph": True, "flush_l2": True, "profile": True}
    assert case_digests(GRAPH | {"name": "renamed"}, {"mode": "default"}, TIMING)["graph_digest"] == d["graph_digest"]


def test_flipping_flush_l2_is_not_comparable_and_never_a_regression():
    slower = _rec(median_ms=1.3, seed=1, timing=TIMING | {"flush_l2": False}, method=METHOD.removesuffix("+flush"))
    cmp = _cmp([_rec()], [slower])
    (case,) = cmp.cases
    lat = {m.metric: m for m in case.changes}["headline_ms"]
    assert lat.verdict == "not comparable" and not case.regressed and cmp.regressions == []
    assert "timing settings differ: flush_l2 True → False" in lat.why and "timing method differs" in lat.why
    assert {m.metric: m.verdict for m in case.changes}["compile_s"] == "unchanged"  # compile is still compared
    assert cmp.not_comparable == [case]
    # The same +30% with the same settings is a regression.
    assert len(_cmp([_rec()], [_rec(median_ms=1.3, seed=1)]).regressions) == 1


def test_other_graph_or_options_make_the_whole_case_not_comparable():
    other_graph = {"nodes": [], "outputs": [1]}
    for cand, why in ((_rec(median_ms=2.0, options={"mode": "max-autotune"}), "mode default → max-autotune"),
                      (_rec(median_ms=2.0, graph=other_graph), "the bound graph differs"),
                      (_rec(graph=other_graph, status="mismatch"), "the bound graph differs")):  # not a status regression
        (case,) = _cmp([_rec()], [cand]).cases
        assert case.status_verdict == "not comparable" and not case.regressed and case.changes == []
        assert any(why in w for w in case.not_comparable), case.not_comparable


def test_records_without_digests_are_still_compared():
    old = {k: v for k, v in _rec().items() if k not in ("graph_digest", "options_digest", "timing_digest")}
    assert len(_cmp([old], [_rec(median_ms=1.3, seed=1)]).regressions) == 1


CPU_METHOD = "host-clock+sync+flush"
RUN_DELAY = "host load: the timing thread waited for a CPU 45% of the timing window (limit 5%)"


def test_a_regression_resting_on_a_noisy_headline_is_suspect_and_still_counted():
    """A CPU headline (host clock) marked noisy by host load: the regression is 'suspect (noisy: ...)', not a plain
    REGRESSION, and still counted, so the exit code stays 1 (nightly CI must not pass a real regression)."""
    cpu = {"device": "cpu", "headline_method": CPU_METHOD}
    noisy = _rec(median_ms=1.3, seed=1, method=CPU_METHOD, measurement_quality="noisy", noise_reasons=[RUN_DELAY],
                 headline_quality="noisy", headline_noise_reasons=[RUN_DELAY], **cpu)
    cmp = _cmp([_rec(method=CPU_METHOD, measurement_quality="clean", noise_reasons=[], **cpu)], [noisy])
    (case,) = cmp.regressions
    lat = {m.metric: m for m in case.changes}["headline_ms"]
    assert lat.verdict == "suspect" and lat.why == f"noisy: candidate: {RUN_DELAY}"
    assert case.regressed and case.suspect and case.noisy == [f"candidate: {RUN_DELAY}"]
    from bakeoff.results.report.compare_format import to_json, to_markdown, to_text
    text = to_text(cmp)
    assert "SUSPECT    gemm_synth" in text and "REGRESSION gemm_synth" not in text
    assert f"suspect (noisy: candidate: {RUN_DELAY})" in text
    assert "(rests on a noisy measurement: candidate: host load" in text
    assert text.splitlines()[0].startswith("1 regression(s) (1 suspect: a noisy headline, still counted)")
    assert "1 measured noisy" in text.splitlines()[0]
    assert "rests on a noisy measurement" in to_markdown(cmp) and json.loads(to_json(cmp))["regressions"] == 1
    # the same host load beside a device-timed headline (CUDA events on a GPU) cannot move it: a plain regression
    gpu = _cmp([_rec()], [_rec(median_ms=1.3, seed=1, measurement_quality="noisy", noise_reasons=[RUN_DELAY])])
    (case,) = gpu.regressions
    assert not case.suspect and case.noisy == [] and "REGRESSION gemm_synth" in to_text(gpu)


def test_the_noise_notes_name_the_candidate_first_and_host_load_before_its_symptoms():
    """A CI log cuts long notes: the candidate (the run asked about) and the cause (host load) come first, the
    base's and the spread's after."""
    cpu = {"device": "cpu", "headline_method": CPU_METHOD}
    spread = "backend IQR/median 0.31 (limit 0.05)"
    base = _rec(method=CPU_METHOD, measurement_quality="noisy", noise_reasons=[spread], headline_quality="noisy",
                headline_noise_reasons=[spread], **cpu)
    cand = _rec(median_ms=1.3, seed=1, method=CPU_METHOD, measurement_quality="noisy",
                noise_reasons=[spread, RUN_DELAY], headline_quality="noisy",
                headline_noise_reasons=[spread, RUN_DELAY], **cpu)
    (case,) = _cmp([base], [cand]).regressions
    assert case.noisy == [f"candidate: {RUN_DELAY}; {spread}", f"base: {spread}"]


def test_options_equal_as_stored_but_not_as_digested_say_the_defaults_changed():
    """Both records store `options: {}` but their digests (defaults filled in) differ: the backend's defaults
    changed with the harness; still not comparable."""
    base = _rec(options={}, options_digest="c66e991541bc777f")
    cand = _rec(options={}, options_digest="eda9e5d948043d5b")
    runs = [RunData({"run_id": r, "fingerprint": "fp", "harness_rev": rev, "environment": environment(0)}, [x])
            for r, rev, x in (("a", "0b46e22", base), ("b", "cb2403b", cand))]
    (case,) = compare_runs(*runs, Thresholds()).cases
    assert case.status_verdict == "not comparable" and not case.regressed
    assert case.not_comparable == ["backend options differ: the backend's defaults changed (harness revision "
                                   "0b46e22 → cb2403b): the stored options are equal ({}) but their digest with "
                                   "defaults filled in is not (c66e991541bc777f → eda9e5d948043d5b)"]
    (case,) = _cmp([base], [cand]).cases  # no revisions known: the defaults, without where they changed
    assert case.not_comparable[0].startswith("backend options differ: the backend's defaults changed: the stored")


def test_compare_with_itself_says_so():
    cmp = _cmp([_rec()], [_rec()], same_run=True)
    from bakeoff.results.report.compare_format import headline
    assert cmp.with_itself and headline(cmp).startswith("Run a compared with itself: every difference is zero")


def _history(url: str, flip_at: int | None) -> Store:
    """Ten nightly runs of one case, +30% latency in the last two; flush_l2 off from `flip_at` on."""
    store = Store(url)
    for night in range(10):
        flipped = flip_at is not None and night >= flip_at
        run_id = store.create_run(config_name="n", config_path=None, config_text="", device="cuda:0",
                                  environment=environment(0), n_cases=1)
        store.add_record(run_id, _rec(median_ms=1.3 if night >= 8 else 1.0, seed=night,
                                      timing=TIMING | {"flush_l2": not flipped}))
        store.finish_run(run_id, "complete")
    return store


def test_dashboard_does_not_flag_a_change_of_timing_settings(tmp_path):
    def latency_flag(store):
        (series,) = [s for s in load_history(store).series if s.metric == "headline_ms"]
        return series.flag, series.points

    flag, _ = latency_flag(_history(f"sqlite:///{tmp_path / 'same.db'}", None))
    assert flag is not None and flag.kind == "regression"
    flag, points = latency_flag(_history(f"sqlite:///{tmp_path / 'flip.db'}", 8))
    assert flag is None  # the step coincides with flush_l2 off: a new baseline, not a regression
    assert points[-1].baseline is None and "timing settings differ: flush_l2 True → False" in points[-1].note


def test_recommendation_uses_the_paired_speedup_and_says_when_noise_decides():
    # Issue 11's loaded CPU: eager's own case measured 1.4 ms; the backend's interleaved eager jumped to 33 ms,
    # so its speedup column says 16.6x. The pick must agree with that column, and say it rests on noise.
    eager = _rec(EAGER, 1.4, compile_s=0.01) | {"speedup_vs_eager": 1.0, "adapter": "eager"}
    fast = _rec(KEY, 2.0, compile_s=0.5) | {"speedup_vs_eager": 16.6, "measurement_quality": "noisy",
                                            "noise_reasons": ["eager reference drifted during the case"]}
    (rec,) = recommend([eager, fast], DEFAULT_WEIGHTS)
    assert rec.backend == "inductor" and rec.noisy == ("inductor",)
    assert "16.60× eager's speed" in rec.reason and "rests on noisy measurements: inductor (eager reference" in rec.reason
    html = render_report([_run("r", [eager, fast])], DEFAULT_WEIGHTS, plotly_js="cdn")
    assert "rests on noisy measurements: inductor" in html and "eager reference drifted during the case" in html
    assert "speedup noisy" in html  # the heatmap cell's hover: the pick's own speedup (its headline's, in an older record)
    clean = fast | {"measurement_quality": "clean", "noise_reasons": []}
    (rec,) = recommend([eager, clean], DEFAULT_WEIGHTS)
    assert rec.noisy == () and "noisy" not in rec.reason


CONFIG = """
name: cmp
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends:
  eager: {}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.1, min_reps: 5, flush_l2: true}
compile: {warm: false}
"""


def test_compare_through_the_cli_marks_a_flush_l2_flip_and_a_run_with_itself(tmp_path):
    db = f"sqlite:///{tmp_path / 'c.db'}"
    ids = []
    for flush in ("true", "false"):
        (tmp_path / "cmp.yaml").write_text(CONFIG.replace("flush_l2: true", f"flush_l2: {flush}"))
        bakeoff("run", "cmp.yaml", "--db", db, cwd=tmp_path, check=True)
        ids.append(json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)[0])
    a, b = ids
    assert a["graph_digest"] == b["graph_digest"] and a["options_digest"] == b["options_digest"]
    assert a["timing_digest"] != b["timing_digest"] and a["timing_settings"]["flush_l2"] is True
    proc = bakeoff("compare", a["run_id"], b["run_id"], "--db", db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
    assert "1 not comparable" in proc.stdout.splitlines()[0]
    assert "timing settings differ: flush_l2 True → False" in proc.stdout and "0 regression(s)" in proc.stdout
    doc = json.loads(bakeoff("compare", a["run_id"], b["run_id"], "-f", "json", "--db", db, cwd=tmp_path).stdout)
    assert doc["not_comparable"] == 1 and doc["regressions"] == 0
    same = bakeoff("compare", b["run_id"], b["run_id"], "--db", db, cwd=tmp_path)
    assert same.returncode == 0 and f"Run {b['run_id']} compared with itself" in same.stdout
