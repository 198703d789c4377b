"""`bakeoff run configs/smoke.yaml` through the real CLI, on eager and Inductor's C++ path."""
import json

import pytest

import pandas as pd
from sqlalchemy import create_engine, text

from conftest import bakeoff
from golden_smoke import GOLDEN, compare, summarize
from bakeoff.workloads.suite import builtin_workloads


def test_every_case_ok_with_positive_latency_and_finite_errors(smoke_run):
    records = smoke_run["records"]
    assert {r["backend"] for r in records} == {"eager", "inductor"}
    assert {r["workload"] for r in records} == set(builtin_workloads())
    for r in records:
        assert r["status"] == "ok", (r["case_id"], r["reason"], r.get("stderr_tail"))
        assert r["latency_ms_median"] > 0 and r["latency_ms_p20"] <= r["latency_ms_median"] <= r["latency_ms_p80"]
        assert len(r["samples_ms"]) == r["n_samples"] >= 5
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
        assert list(frame.columns) == list(smoke_run["records"][0]), fmt
        golden = json.loads(GOLDEN.read_text())["smoke"]["columns"]
        assert set(frame.columns) == set(golden), (fmt, sorted(set(golden) ^ set(frame.columns)))
        assert frame["latency_ms_median"].gt(0).all()


def test_the_run_behaves_as_the_golden_file_says(smoke_run):
    """Statuses, verdicts, the figures each case measured and the export's columns, as before (values differ):
    tests/golden_smoke.py says what is compared and how to regenerate the file after a deliberate change."""
    problems = compare(json.loads(GOLDEN.read_text())["smoke"], summarize(smoke_run["records"]))
    assert not problems, "\n".join(problems)


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

# Where the smoke run's time goes: every record's `phases_s` covers its `wall_s`, workers after the first are
# pre-started, a pre-started cold compile is still cold (an empty cache, no hit) and the warm one a verified
# hit, the float64 reference is shared within a group, and `show` ends with the totals. (Every test of the smoke
# run is in this file, so that a per-file parallel runner such as pytest-xdist's --dist loadfile runs it once; a
# crashed worker's phases: tests/test_faults.py.)
OTHER_FLOOR_S = 0.05  # seconds of a case's wall time its phases may leave unnamed, however short the case


@pytest.fixture(scope="module")
def phases_run(smoke_run):
    """The suite's smoke run (configs/smoke.yaml on eager and Inductor, warm compile on, two slots under
    `--gate timers_only`): 22 cases."""
    return smoke_run


def test_phases_cover_the_wall_time_of_every_case(phases_run):
    for r in phases_run["records"]:
        phases, wall = r["phases_s"], r["wall_s"]
        assert abs(sum(phases.values()) - wall) <= 0.05 * wall, (r["case_id"], phases, wall)
        # Named phases explain >= 95%. A prestarted eager case lasts half a second; the worker's own time is all
        # named (its time between phases too), and what the orchestrator's steps leave unnamed, 5-20 ms on this
        # machine, may be up to OTHER_FLOOR_S however short the case.
        assert phases["other"] <= max(0.05 * wall, OTHER_FLOOR_S), (r["case_id"], phases, wall)
        assert all(v >= 0 for v in phases.values())
        if r["status"] == "ok":
            for name in ("process_start", "imports", "inputs", "eager_baseline", "reference", "compile",
                         "checks", "timing", "exit"):
                assert name in phases, (r["case_id"], name)
            assert phases["timing"] > 0 and phases["compile"] > 0
        assert r["gate_policy"] == phases_run["gate"], r["case_id"]  # auto's choice: test_the_gate_policy_...


def test_the_warm_process_has_its_own_phases(phases_run):
    for r in phases_run["records"]:
        if r["backend"] == "inductor":
            assert r["phases_s"]["warm_compile"] > 0 and "warm_exit" in r["phases_s"], r["case_id"]
        else:
            assert not any(k.startswith("warm_") for k in r["phases_s"]), r["case_id"]


def test_pre_started_workers_keep_cold_compiles_cold(phases_run):
    records = phases_run["records"]
    by_slot: dict[str, list[dict]] = {}
    for r in records:  # in the order they were written: each slot's cases in the order it ran them
        by_slot.setdefault(r["worker"], []).append(r)
    assert len(by_slot) == phases_run["jobs"], sorted(by_slot)
    for slot, rs in by_slot.items():
        assert rs[0]["worker_start"] == "fresh", slot  # the first worker of a slot has no spare yet
        assert all(r["worker_start"] == "prestarted" for r in rs[1:]), (slot, [r.get("worker_start_reason")
                                                                                for r in rs])
    inductor = [r for r in records if r["backend"] == "inductor"]
    # At most one fresh worker per slot: the others' imports were done before their case arrived.
    assert sum(r["worker_start"] == "prestarted" for r in inductor) >= len(inductor) - phases_run["jobs"]
    for r in inductor:
        assert r["worker_start_warm"] == "prestarted"
        if r["worker_start"] == "prestarted":
            assert r["phases_s"]["imports"] < 0.5 * r["phases_s"]["compile"]  # torch was imported beforehand
        assert r["cache_files_before_cold"] == 0 and r["cache_files_cold"] > 0  # its own, empty cache
        assert r["cache_hit_cold"] is False  # Inductor's own counter: a miss
        # The process warm-up compile stays in the case's process, and the record says why.
        assert r["phases_s"]["compile_setup"] > 0 and "worker pool" in r["compile_setup_in_case_reason"]
        assert r["cache_hit_warm"] is True
        # Spares got ready during its compiles, the process warm-up compile included (at most two spares at
        # once): how long is on the record.
        phases = r["phases_s"]
        cold_s = phases["compile"] + phases.get("compile_setup", 0.0)
        warm_s = phases["warm_compile"] + phases.get("warm_compile_setup", 0.0)
        assert 0 <= r["warmup_overlap_compile_s"] <= 2 * cold_s + 1, phases
        assert 0 <= r["warmup_overlap_compile_warm_s"] <= 2 * warm_s + 1, phases


def test_the_reference_is_computed_once_per_group(phases_run):
    groups: dict[str, list[dict]] = {}
    for r in phases_run["records"]:
        if r.get("reference_source"):
            groups.setdefault(r["workload"], []).append(r)
    assert len(groups) == 11
    for workload, rs in groups.items():
        # The case that takes the group's lock first computes it (with two slots, not always the first written);
        # at smoke sizes reading it back beats computing it, so the others read it.
        sources = [r["reference_source"] for r in rs]
        assert all(set(s) == {"0", "1"} for s in sources), (workload, sources)
        for seed in ("0", "1"):
            assert sorted(s[seed] for s in sources) == ["computed"] + ["shared"] * (len(rs) - 1), (workload, sources)


def test_show_ends_with_the_run_totals(phases_run):
    shown = bakeoff("show", "--db", phases_run["db"], cwd=phases_run["dir"], check=True).stdout
    totals, elapsed = shown.strip().splitlines()[-2:]
    assert "cases ran for" in totals and "compiling" in totals and "timing" in totals and "overhead" in totals, totals
    assert elapsed.startswith("of the ") and "some case was compiling or timing during" in elapsed, elapsed


def test_compile_windows_lie_in_the_run_and_match_the_compile_phases(phases_run):
    """Each process's compile_setup and compile are kept as epoch windows (the elapsed overhead share's input)."""
    from bakeoff.harness.cli.overhead import elapsed_split

    for r in phases_run["records"]:
        if r["status"] != "ok":
            continue
        windows, phases = r["compile_windows_epoch_s"], r["phases_s"]
        assert len(windows) == (4 if r["backend"] != "eager" else 2), (r["case_id"], windows)
        assert all(a <= b for a, b in windows)
        seconds = sum(phases.get(p, 0.0) for p in ("compile_setup", "compile", "warm_compile_setup", "warm_compile"))
        assert sum(b - a for a, b in windows) == pytest.approx(seconds, rel=0.01, abs=0.01), r["case_id"]
        for a, b in r.get("timing_windows_epoch_s") or []:  # timing follows the cold compile
            assert a >= windows[1][1] - 1e-3, r["case_id"]
    split = elapsed_split(phases_run["records"], 1e6)  # a long elapsed time: the union is what the cases did
    assert 0 < split["timing_s"] < split["measuring_s"] < 1e6 and split["overhead_share"] > 0.99
