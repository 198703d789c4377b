"""The rules of compare, the recommendation score and the quality charts on small synthetic runs (made up,
tests only: report_history.record builds the records), plus the CI guard of skips (ci_required.py) and the
screenshot folder. Nothing here runs a benchmark."""
from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest
from sqlalchemy import update

import browser
import ci_required
import pgserver
from conftest import bakeoff
from bakeoff.harness.cli.report_commands import previous_run, resolve_run
from report_history import environment, record
from bakeoff.results.report.compare import Thresholds, compare_runs
from bakeoff.results.report.data import RunData
from bakeoff.results.report.charts_quality import error_chart, roofline
from bakeoff.results.report.weights import DEFAULT_WEIGHTS, recommend
from bakeoff.results.schema import runs as runs_table
from bakeoff.results.store import Store, StoreError

GEMM = ("gemm_synth", "M=64,N=64,K=64", "bfloat16", "inductor")
GEMM_EAGER = GEMM[:3] + ("eager",)
SOFTMAX = ("softmax_synth", "M=64,N=512", "float32", "inductor")
LAYERNORM = ("layernorm_synth", "M=64,N=256", "bfloat16", "tritongen")


def _run(run_id: str, cases: list[dict], fingerprint: str = "fp", ceilings: dict | None = None) -> RunData:
    env = environment(0) | {"fingerprint": fingerprint}
    return RunData({"run_id": run_id, "fingerprint": fingerprint, "environment": env}, cases, ceilings or {})


def _rec(key, median_ms=1.0, seed=0, **fields) -> dict:
    return record(key, median_ms, random.Random(seed)) | fields


def _verdicts(cmp) -> dict[tuple, dict[str, str]]:
    return {c.key: {m.metric: m.verdict for m in c.changes} for c in cmp.cases}


# 1a: cases of the base missing from the candidate
def test_cases_missing_from_the_candidate_are_regressions_unless_allowed():
    base = _run("b", [_rec(GEMM), _rec(SOFTMAX), _rec(LAYERNORM)])
    cand = _run("c", [_rec(GEMM), _rec(SOFTMAX)])  # a killed run: one case never recorded
    cmp = compare_runs(base, cand)
    assert [c.key for c in cmp.regressions] == [LAYERNORM]
    missing = cmp.regressions[0]
    assert missing.candidate_status == "missing" and missing.status_verdict == "regressed"
    assert len(cmp.matched) == 2 and cmp.only_base == [LAYERNORM]
    allowed = compare_runs(base, cand, allow_missing=True)
    assert allowed.regressions == [] and allowed.cases[-1].status_verdict == "missing"
    # Extra cases in the candidate are not regressions.
    assert compare_runs(cand, base).regressions == []


# 1b: compile time needs an absolute change too
def test_compile_time_changes_need_an_absolute_floor():
    base = _run("b", [_rec(GEMM_EAGER, compile_s=0.004, compile_warm_s=0.003),  # eager: first call, ms
                      _rec(GEMM, compile_s=10.0, compile_warm_s=2.0),
                      _rec(SOFTMAX, compile_s=0.2, compile_warm_s=0.05)])
    cand = _run("c", [_rec(GEMM_EAGER, compile_s=0.008, compile_warm_s=0.006),  # +100%, 4 ms: noise
                      _rec(GEMM, compile_s=12.0, compile_warm_s=3.0),  # +20% (2 s) cold, +50% (1 s) warm
                      _rec(SOFTMAX, compile_s=0.4, compile_warm_s=0.01)])  # +100% but 0.2 s
    v = _verdicts(compare_runs(base, cand))
    assert v[GEMM_EAGER]["compile_s"] == "unchanged" and v[GEMM_EAGER]["compile_warm_s"] == "unchanged"
    assert v[GEMM]["compile_s"] == "regressed" and v[GEMM]["compile_warm_s"] == "regressed"
    assert v[SOFTMAX]["compile_s"] == "unchanged" and v[SOFTMAX]["compile_warm_s"] == "unchanged"
    # The floor is a threshold like the others: 0 restores the relative-only rule.
    strict = _verdicts(compare_runs(base, cand, Thresholds(compile_abs_s=0.0)))
    assert strict[GEMM_EAGER]["compile_s"] == "regressed" and strict[SOFTMAX]["compile_s"] == "regressed"
    assert strict[SOFTMAX]["compile_warm_s"] == "improved"


# 1c: errors at rounding level are not told apart
def test_error_from_zero_needs_more_than_rounding():
    fp32 = SOFTMAX  # unit roundoff 2^-24 ≈ 6e-8
    bf16 = GEMM  # unit roundoff 2^-8 ≈ 3.9e-3
    cases = [(fp32, 0.0, 1e-7, "unchanged"), (fp32, 0.0, 0.0, "unchanged"), (fp32, 0.0, 1e-3, "regressed"),
             (fp32, 1e-3, 1e-7, "improved"), (bf16, 1e-3, 3e-3, "unchanged"), (bf16, 4e-3, 1e-2, "regressed")]
    for key, b, c, expected in cases:
        base = _run("b", [_rec(key, err_rel_l2_vs_fp64=b)])
        cand = _run("c", [_rec(key, err_rel_l2_vs_fp64=c)])
        got = _verdicts(compare_runs(base, cand))[key]["err_rel_l2_vs_fp64"]
        assert got == expected, (key, b, c, got)
    base, cand = _run("b", [_rec(fp32, err_rel_l2_vs_fp64=0.0)]), _run("c", [_rec(fp32, err_rel_l2_vs_fp64=1e-7)])
    assert _verdicts(compare_runs(base, cand, Thresholds(error_floor=0.0)))[fp32]["err_rel_l2_vs_fp64"] == "regressed"


# 2: what 'previous' means
def _store_with_nights(url: str) -> tuple[Store, dict[str, str]]:
    """Runs oldest first: a good night, another config, another GPU, an interrupted night, tonight."""
    store = Store(url)
    start = dt.datetime(2026, 11, 1, 2, 17, tzinfo=dt.timezone.utc)
    plan = [("good", "nightly", "NVIDIA H200", "complete", [GEMM, SOFTMAX, LAYERNORM]),
            ("other_config", "smoke", "NVIDIA H200", "complete", [GEMM, SOFTMAX, LAYERNORM]),
            ("other_gpu", "nightly", "NVIDIA B200", "complete", [GEMM, SOFTMAX, LAYERNORM]),
            ("interrupted", "nightly", "NVIDIA H200", "interrupted", [GEMM]),
            ("tonight", "nightly", "NVIDIA H200", "interrupted", [GEMM, SOFTMAX])]
    ids = {}
    for i, (name, config, gpu, status, keys) in enumerate(plan):
        env = environment(i) | {"gpu_name": gpu}  # the fingerprint differs every night (software versions)
        run_id = store.create_run(config_name=config, config_path=None, config_text="", device="cuda:0",
                                  environment=env, n_cases=3)
        for key in keys:
            store.add_record(run_id, _rec(key))
        store.finish_run(run_id, status)
        with store.engine.begin() as conn:
            conn.execute(update(runs_table).where(runs_table.c.run_id == run_id)
                         .values(started_at=start + dt.timedelta(days=i)))
        ids[name] = run_id
    return store, ids


def test_previous_is_the_newest_complete_run_of_the_same_config_and_hardware(tmp_path):
    store, ids = _store_with_nights(f"sqlite:///{tmp_path / 'n.db'}")
    assert resolve_run(store, "latest") == ids["tonight"]
    assert resolve_run(store, "previous") == ids["good"]
    assert previous_run(store, ids["tonight"])["run_id"] == ids["good"]
    assert previous_run(store, ids["other_gpu"]) is None  # no earlier B200 run
    with pytest.raises(StoreError, match="config 'smoke'"):  # the good night is another config
        resolve_run(store, "previous", relative_to=ids["other_config"])
    with pytest.raises(StoreError, match="no complete run of config 'nightly'"):
        resolve_run(store, "previous", relative_to=ids["good"])
    with pytest.raises(StoreError):
        resolve_run(store, "previous", relative_to="no-such-run")
    # Through the CLI: the base is the good night; tonight's run lacks one of its cases -> exit 1.
    proc = bakeoff("compare", "previous", "latest", "--format", "json", "--db", store.url, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["base"] == ids["good"] and doc["candidate"] == ids["tonight"]
    assert doc["only_base"] == ["/".join(LAYERNORM)] and doc["regressions"] == 1
    missing = [c for c in doc["cases"] if c["candidate_status"] == "missing"]
    assert len(missing) == 1 and missing[0]["regressed"]
    allowed = bakeoff("compare", "previous", "latest", "--allow-missing", "--db", store.url, cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stdout
    assert "1 missing from the candidate" in allowed.stdout and "allowed" in allowed.stdout
    # 'previous' of an explicit candidate; none for the first B200 run -> exit 2 with the reason.
    proc = bakeoff("compare", "previous", ids["other_gpu"], "--db", store.url, cwd=tmp_path)
    assert proc.returncode == 2 and "no complete run of config 'nightly'" in proc.stdout + proc.stderr


# 3: several runs on the quality charts
def test_error_chart_draws_references_per_run_with_labels():
    one = error_chart([_run("r1", [_rec(GEMM), _rec(SOFTMAX)])])
    assert [t.name for t in one.data if t.name.startswith("eager's error")] == ["eager's error"]
    runs = [_run(f"r{i}", [_rec(GEMM, eager_err_rel_l2_vs_fp64=1e-3 * i), _rec(SOFTMAX), _rec(LAYERNORM)])
            for i in (1, 2)]
    fig = error_chart(runs)
    eager = [t for t in fig.data if t.name.startswith("eager's error")]
    tol = [t for t in fig.data if t.name.startswith("tolerance")]
    assert len(eager) == 2 and len(tol) == 2
    assert [t.name for t in eager] == ["eager's error · #1 r1", "eager's error · #2 r2"]
    assert all(len(t.x) == 3 for t in eager + tol)
    assert list(eager[1].y)[0] == pytest.approx(2e-3) and list(eager[0].y)[0] == pytest.approx(1e-3)
    # Each run's ticks sit with its own markers, beside the other run's.
    markers = [t for t in fig.data if t not in eager + tol]
    assert len(markers) == 4  # inductor and tritongen, per run
    for t in markers:
        assert t.offsetgroup == t.name.split(" · ")[1]
    assert {t.offsetgroup for t in eager + tol} == {"#1 r1", "#2 r2"}
    assert fig.layout.scattermode == "group"


def test_roofline_draws_each_runs_copy_roof():
    cases = [_rec(GEMM)]
    matmul = _run("r1", cases, "fp-a", {"copy_gbps": 4000.0, "matmul_tflops_bfloat16": 800.0})
    copy_only = _run("r2", cases, "fp-b", {"copy_gbps": 3000.0})
    fig = roofline([matmul, copy_only])
    names = [t.name for t in fig.data if t.mode == "lines"]
    assert names == ["roof matmul_tflops_bfloat16 (fp-a)", "copy 3000 GB/s (fp-b)"]
    both_copy = roofline([_run("r1", cases, "fp-a", {"copy_gbps": 4000.0}), copy_only])
    assert [t.name for t in both_copy.data if t.mode == "lines"] == ["copy 4000 GB/s (fp-a)", "copy 3000 GB/s (fp-b)"]
    assert len(roofline([_run("r1", cases, "fp-a")]).layout.annotations) == 1  # the "run calibrate" note


# 6: compile time in the recommendation score
def test_a_2x_faster_backend_with_a_10s_compile_beats_eager_by_default():
    eager = _rec(GEMM_EAGER, 2.0, compile_s=0.004)
    fast = _rec(GEMM, 1.0, compile_s=10.0)
    (rec,) = recommend([eager, fast], DEFAULT_WEIGHTS)
    assert rec.backend == "inductor", rec.reason
    assert "first result 10 s after a cold start" in rec.reason
    # Compile time still counts: 1.2× faster does not pay for a 10 s compile (0.2·ln 10 > ln 1.2).
    (rec,) = recommend([eager, _rec(GEMM, 2.0 / 1.2, compile_s=10.0)], DEFAULT_WEIGHTS)
    assert rec.backend == "eager" and "first result 0.004 s after a cold start" in rec.reason
    # Under the 1 s floor compile times tie.
    (rec,) = recommend([eager, _rec(GEMM, 2.0 / 1.05, compile_s=0.9)], DEFAULT_WEIGHTS)
    assert rec.backend == "inductor"


# 4: CI must not skip what it installs
def test_missing_dependencies_fail_under_bakeoff_ci(monkeypatch):
    monkeypatch.setenv("BAKEOFF_CI", "1")
    with pytest.raises(pytest.fail.Exception, match="BAKEOFF_CI=1"):
        ci_required.skip_or_fail("chromium is not installed")
    with pytest.raises(pytest.fail.Exception, match="no_such_module_xyz"):
        ci_required.importorskip("no_such_module_xyz", reason="needed")
    monkeypatch.setattr(pgserver, "why_no_postgres", lambda: "no PostgreSQL server binaries")
    with pytest.raises(pytest.fail.Exception, match="no PostgreSQL server binaries"):
        next(pgserver.start_server())
    monkeypatch.setattr(browser, "chromium_path", lambda: None)
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed"):
        with browser.open_browser():
            pass
    monkeypatch.setenv("BAKEOFF_CI", "0")
    with pytest.raises(pytest.skip.Exception):
        with browser.open_browser():
            pass
    monkeypatch.delenv("BAKEOFF_CI")
    with pytest.raises(pytest.skip.Exception):
        next(pgserver.start_server())
    assert ci_required.importorskip("json", reason="stdlib") is json


def test_ci_run_sets_bakeoff_ci_and_runs_the_readme_command():
    repo = Path(__file__).resolve().parent.parent
    readme_cmd = (repo / "README.md").read_text().split("```bash\n", 1)[1].splitlines()[1]
    lines = [x for x in (repo / ".ci" / "run").read_text().splitlines() if x and not x.startswith("#")]
    assert lines[-1] == readme_cmd and "export BAKEOFF_CI=1" in lines


# 5: screenshots outlive the session
def test_screenshots_default_to_tests_artifacts(monkeypatch, tmp_path):
    monkeypatch.delenv("BAKEOFF_TEST_ARTIFACTS", raising=False)
    assert browser.artifacts_dir() == Path(__file__).resolve().parent / "artifacts"
    monkeypatch.setenv("BAKEOFF_TEST_ARTIFACTS", str(tmp_path / "shots"))
    assert browser.artifacts_dir() == tmp_path / "shots" and (tmp_path / "shots").is_dir()
