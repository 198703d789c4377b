"""`bakeoff run configs/smoke.yaml` through the real CLI, on eager and Inductor's C++ path."""
import json

import pandas as pd
from sqlalchemy import create_engine, text

from conftest import bakeoff
from bakeoff.workloads.suite import builtin_workloads


def test_every_case_ok_with_positive_latency_and_finite_errors(smoke_run):
    records = smoke_run["records"]
    assert {r["backend"] for r in records} == {"eager", "inductor"}
    assert {r["workload"] for r in records} == set(builtin_workloads())
    for r in records:
        assert r["status"] == "ok", (r["case_id"], r["reason"], r.get("stderr_tail"))
        assert r["latency_ms_median"] > 0 and r["latency_ms_p20"] <= r["latency_ms_median"] <= r["latency_ms_p80"]
        assert len(r["samples"]) == r["n_samples"] >= 5
        assert r["compile_s"] > 0
        for key in ("err_rel_l2_vs_fp64", "err_max_abs_vs_eager", "err_rel_l2_vs_eager", "eager_err_rel_l2_vs_fp64"):
            assert r[key] is not None and r[key] >= 0 and r[key] < 1e-3, (r["case_id"], key, r[key])
        assert r["achieved_gbps"] > 0 and r["speedup_vs_eager"] > 0
        assert r["checked_seeds"] == [0, 1]
        # On the CPU the headline is the timer's figure; the single and pipelined calls are beside it.
        assert r["headline_ms"] == r["latency_ms_median"] and r["headline_method"] == r["timing_method"]
        assert r["host_latency_ms"] > 0 and r["pipelined_ms"] > 0 and r["pipelined_calls"] >= 2
        assert r["compile_process_setup_s"] > 0


def test_inductor_warm_compile_hits_the_cache(smoke_run):
    for r in smoke_run["records"]:
        if r["backend"] == "inductor":
            assert r["cache_hit_warm"] is True, r["case_id"]
            assert r["compile_warm_s"] > 0
            assert r["cache_files_cold"] > 0  # the cold run wrote the cache the warm run read
            # The warm-up graph that times the process's one-time start fed nothing to the case's cold compile.
            assert r["cache_hit_cold"] is False and r["compile_process_setup_warm_s"] > 0


def test_inductor_records_say_what_the_run_handed_its_start_up(smoke_run):
    """backends/inductor_cpu.py: the vector-ISA setting and where it came from, and the header folder."""
    for r in smoke_run["records"]:
        if r["backend"] != "inductor":
            continue
        isa, = [n for n in r["compile_notes"] if n.startswith("cpp.vec_isa_ok=")]
        # This machine's compiler builds every ISA its CPU reports: the run's probe hands the setting over.
        assert isa.startswith("cpp.vec_isa_ok=True (TORCHINDUCTOR_VEC_ISA_OK=1, set by the harness"), isa
        pch, = [n for n in r["compile_notes"] if n.startswith("precompiled headers:")]
        assert "Inductor header folder" in pch and "built by this process" in pch, pch
        ext, = [n for n in r["compile_notes"] if n.startswith("ISA extension checks:")]
        assert "answered from the run's probe" in ext and " 0 built and loaded by this process" in ext, ext


def test_summary_table_and_show(smoke_run):
    assert "layernorm_gelu" in smoke_run["stdout"] and "22 ok" in smoke_run["stdout"]
    shown = bakeoff("show", "--db", smoke_run["db"], cwd=smoke_run["dir"], check=True).stdout
    assert "mlp_block" in shown and "inductor" in shown and "fingerprint" in shown


def test_export_csv_and_parquet_match_json(smoke_run, tmp_path):
    run_id = smoke_run["records"][0]["run_id"]
    for fmt in ("csv", "parquet"):
        out = tmp_path / f"r.{fmt}"
        bakeoff("export", run_id, "--format", fmt, "-o", str(out), "--db", smoke_run["db"], cwd=smoke_run["dir"], check=True)
        frame = pd.read_csv(out) if fmt == "csv" else pd.read_parquet(out)
        assert len(frame) == len(smoke_run["records"])
        assert frame["latency_ms_median"].gt(0).all()


def test_run_records_environment_fingerprint(smoke_run):
    engine = create_engine(smoke_run["db"])
    with engine.connect() as conn:
        rows = conn.execute(text("select fingerprint, environment, status, schema_version from runs")).all()
    assert rows
    for fingerprint, env, status, version in rows:
        env = json.loads(env) if isinstance(env, str) else env
        assert fingerprint and env["fingerprint"] == fingerprint and status == "complete" and version >= 1
        assert env["versions"]["torch"] and env["cpu_model"] and "load_avg" in env and env["harness_rev"]


def test_unknown_run_id_is_exit_2(smoke_run):
    proc = bakeoff("show", "no-such-run", "--db", smoke_run["db"], cwd=smoke_run["dir"])
    assert proc.returncode == 2 and "no run" in proc.stderr
