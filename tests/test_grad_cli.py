"""Training-step cases (`grad: true`) end to end through the CLI on the CPU, at smoke size: eager, Inductor
and XLA pass with every gradient's error recorded; a backend whose gradient is wrong for one input only is
caught naming that input; backends without a backward are skipped with the reason; show and report mark the
cases fwd+bwd; a bad `grad` value exits 2 naming the file, the line and the field."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import background_runs
from conftest import bakeoff

CONFIG = """
name: grad-cli
device: cpu
preset: smoke
dtypes: [float32]
workloads:
  - {name: gemm_bias_gelu, grad: true}
backends:
  eager: {}
  inductor: {}
  xla: {}
  wrong_w: {backend: faulty, mode: wrong_grad, grad_input: w, scale: 0.01}
  onnxruntime: {}
  tensorrt: {}
  tritongen: {}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
"""
NAMES = {"out0", "grad:x", "grad:w", "grad:b"}
RUN_TIMEOUT_S = 1800  # from the session's start: the run waits for the CPU the other tests leave idle


def background_run_args(work: Path) -> list[str]:
    """The run this module checks, started as the session begins at low priority (tests/background_runs.py):
    its tests judge numbers and statuses, no timing."""
    (work / "grad.yaml").write_text(CONFIG)
    return ["run", "grad.yaml", "--jobs", "2", "--db", f"sqlite:///{work / 'g.db'}"]  # Inductor beside the rest


@pytest.fixture(scope="module")
def grad_run() -> dict:
    work, stdout = background_runs.collect(__name__, RUN_TIMEOUT_S)
    db = f"sqlite:///{work / 'g.db'}"
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=work, check=True).stdout)
    return {"dir": work, "db": db, "stdout": stdout, "records": {r["backend"]: r for r in records}}


@pytest.mark.parametrize("label", ["eager", "inductor", "xla"])
def test_grad_cases_pass_with_every_gradient_checked(grad_run, label):
    r = grad_run["records"][label]
    assert r["status"] == "ok", r["reason"]
    assert r["grad"] is True and r["workload"] == "gemm_bias_gelu (fwd+bwd)"
    assert r["case_id"].startswith("gemm_bias_gelu (fwd+bwd)/M=48,K=80,N=72/float32/")
    assert set(r["output_errors"]) == NAMES
    for name, fig in r["output_errors"].items():
        assert fig["status"] == "ok", (name, fig)
        # float32 gradients are within a few units of roundoff of the fp64 reference, and not exact
        assert 0 < fig["err_rel_l2_vs_fp64"] < 1e-5, (name, fig)
        assert fig["err_ratio_vs_eager"] is not None and math.isfinite(fig["err_ratio_vs_eager"])
    assert r["worst_output"] in NAMES
    assert r["latency_ms_median"] > 0 and r["checked_seeds"] == [0, 1]


def test_eager_gradient_error_is_the_yardstick(grad_run):
    eager = grad_run["records"]["eager"]["output_errors"]
    assert all(fig["err_ratio_vs_eager"] == 1.0 for fig in eager.values())
    inductor = grad_run["records"]["inductor"]["output_errors"]
    for name in NAMES:  # each backend's gradient is judged against eager's own error on that gradient
        assert inductor[name]["eager_err_rmse_vs_fp64"] > 0


def test_inductor_compiled_the_backward(grad_run):
    r = grad_run["records"]["inductor"]
    assert any("CompiledFunctionBackward" in note for note in r["compile_notes"]), r["compile_notes"]
    assert r["artifacts"]["inductor_graphs"] >= 2  # forward and backward, each an Inductor graph


def test_xla_compiled_the_vjp(grad_run):
    assert any("jax.vjp" in note for note in grad_run["records"]["xla"]["compile_notes"])


def test_one_wrong_gradient_is_caught_by_name(grad_run):
    r = grad_run["records"]["wrong_w"]
    assert r["status"] == "mismatch"
    assert r["reason"].startswith("grad:w: "), r["reason"]
    assert r["worst_output"] == "grad:w"
    errors = r["output_errors"]
    assert errors["grad:w"]["status"] == "mismatch" and errors["grad:w"]["err_rel_l2_vs_fp64"] > 1e-3
    assert {n for n, fig in errors.items() if fig["status"] == "ok"} == NAMES - {"grad:w"}


def test_backends_without_a_backward_are_skipped_with_the_reason(grad_run):
    recs = grad_run["records"]
    for label, words in (("onnxruntime", "inference only"), ("tensorrt", "inference only"),
                         ("tritongen", "no backward")):
        assert recs[label]["status"] == "skipped"
        assert words in recs[label]["reason"], recs[label]["reason"]


def test_costs_are_the_training_step(grad_run):
    r = grad_run["records"]["eager"]
    m, k, n = 48, 80, 72
    forward_matmul = 2 * m * k * n
    # forward: matmul + bias add + gelu; backward: 2x the matmul and more; gradients and cotangents moved
    assert r["flops"] > 3 * forward_matmul
    assert r["bytes_moved"] == 4 * 2 * (m * k + k * n + n + m * n)
    forward_digest = grad_run["records"]["eager"]["graph_digest"]
    from bakeoff.harness.plan.digests import graph_digest
    from bakeoff.workloads.ir import bind
    from bakeoff.workloads.suite import builtin_workloads

    graph = bind(builtin_workloads()["gemm_bias_gelu"].graph, {"M": m, "K": k, "N": n}, "float32").to_json()
    assert forward_digest == graph_digest(graph, grad=True) != graph_digest(graph)


def test_show_and_report_mark_grad_cases(grad_run):
    assert "gemm_bias_gelu (fwd+bwd)" in grad_run["stdout"]
    work, db = grad_run["dir"], grad_run["db"]
    wide = bakeoff("show", "--wide", "--db", db, cwd=work, check=True).stdout
    assert "(fwd+bwd)" in wide
    bakeoff("report", "latest", "-o", "r.html", "--db", db, cwd=work, check=True)
    assert "gemm_bias_gelu (fwd+bwd)" in (work / "r.html").read_text()


@pytest.mark.parametrize("value,words", [("yes", "grad"), ("1", "grad")])
def test_grad_config_errors_name_file_line_and_field(tmp_path, value, words):
    (tmp_path / "bad.yaml").write_text("name: bad\nworkloads:\n  - name: mlp_block\n    grad: " + value + "\n")
    proc = bakeoff("run", "bad.yaml", "--db", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path)
    assert proc.returncode == 2
    assert "bad.yaml:4" in proc.stderr + proc.stdout and words in proc.stderr + proc.stdout
    assert not (tmp_path / "x.db").exists()


def test_a_workload_twice_with_grad_is_refused_but_forward_and_grad_may_both_run(tmp_path):
    twice = "name: t\nworkloads:\n  - {name: mlp_block, grad: true}\n  - {name: mlp_block, grad: true}\n"
    (tmp_path / "twice.yaml").write_text(twice)
    proc = bakeoff("run", "twice.yaml", "--db", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path)
    assert proc.returncode == 2 and "twice.yaml:4" in proc.stderr + proc.stdout
    from bakeoff.harness.config.schema import parse_config
    from bakeoff.harness.plan.workloads import resolve_workloads
    from bakeoff.harness.plan.cases import plan_cases

    cfg, where = parse_config("name: t\nbackends: [eager]\nworkloads:\n  - mlp_block\n"
                              "  - {name: mlp_block, grad: true}\n", "both.yaml")
    cases = plan_cases(cfg, resolve_workloads(cfg, where, "smoke"), "cpu")
    assert [c.case_id.split("/")[0] for c in cases] == ["mlp_block", "mlp_block (fwd+bwd)"]
    assert cases[1].flops > cases[0].flops and cases[1].bytes_moved > cases[0].bytes_moved
