"""Where a case's time goes, through the real CLI (the suite's smoke run): every record's `phases_s` covers
its `wall_s`, workers after the first are pre-started, a pre-started cold compile is still cold (an empty
cache, no hit) and the warm one a verified hit, the float64 reference is shared within a group, and `show`
ends with the totals. A crashed worker's phases: tests/test_faults.py."""
from __future__ import annotations

import json

import pytest

from conftest import bakeoff


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
        # Named phases explain >= 95%; a prestarted eager case lasts half a second, and handing it over leaves
        # some 10-30 ms unnamed, so "other" may also be up to OTHER_FLOOR_S.
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
        windows, phases = r["compile_windows"], r["phases_s"]
        assert len(windows) == (4 if r["backend"] != "eager" else 2), (r["case_id"], windows)
        assert all(a <= b for a, b in windows)
        seconds = sum(phases.get(p, 0.0) for p in ("compile_setup", "compile", "warm_compile_setup", "warm_compile"))
        assert sum(b - a for a, b in windows) == pytest.approx(seconds, rel=0.01, abs=0.01), r["case_id"]
        for a, b in r.get("timing_windows") or []:  # timing follows the cold compile
            assert a >= windows[1][1] - 1e-3, r["case_id"]
    split = elapsed_split(phases_run["records"], 1e6)  # a long elapsed time: the union is what the cases did
    assert 0 < split["timing_s"] < split["measuring_s"] < 1e6 and split["overhead_share"] > 0.99


GATE_CONFIG = """
name: gate_policy
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu, rmsnorm]
backends: [eager]
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3, gate: timers_only}
compile: {warm: false}
"""


def test_the_gate_policy_comes_from_the_config_or_the_command_line(tmp_path):
    (tmp_path / "g.yaml").write_text(GATE_CONFIG)
    db = f"sqlite:///{tmp_path / 'g.db'}"
    bad = bakeoff("run", "g.yaml", "--gate", "sometimes", "--db", db, cwd=tmp_path)
    assert bad.returncode == 2 and "--gate must be one of auto, exclusive, timers_only" in bad.stderr
    assert not (tmp_path / "g.db").exists()  # nothing written

    def policies(*args: str) -> set[str]:
        bakeoff("run", "g.yaml", *args, "--db", db, cwd=tmp_path, check=True)
        records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
        assert all(r["status"] == "ok" for r in records)
        return {r["gate_policy"] for r in records}

    assert policies() == {"timers_only"}  # the config's
    assert policies("--gate", "exclusive") == {"exclusive"}  # the command line's
    assert policies("--gate", "auto") == {"exclusive"}  # auto, on the CPU: every figure is host-timed
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    assert all(r["gate_policy_reason"].startswith("auto: on the CPU") for r in records), records
    (tmp_path / "g.yaml").write_text(GATE_CONFIG.replace("gate: timers_only", "gate: always"))
    refused = bakeoff("run", "g.yaml", "--db", db, cwd=tmp_path)
    assert refused.returncode == 2 and "gate" in refused.stderr


def test_the_elapsed_share_counts_each_second_once_however_many_cases_overlap():
    from bakeoff.harness.cli.overhead import elapsed_line, elapsed_split

    records = [{"compile_windows": [[0, 1], [5, 6]], "timing_windows": [[1, 2]]},
               {"compile_windows": [[0.5, 1.5]], "details": {"timing_windows": [[1.8, 3]]}},  # as stored
               {"status": "skipped"}]
    split = elapsed_split(records, 10.0)
    assert split == {"elapsed_s": 10.0, "measuring_s": 4.0, "timing_s": 2.0, "overhead_share": 0.6}
    assert "during 40% (timing 20%): overhead 60%" in elapsed_line(records, 10.0)
    assert elapsed_split([{"timing_windows": [[0, 1]]}], 10.0) is None  # a run recorded before compile_windows
    assert elapsed_line(records, None) is None
