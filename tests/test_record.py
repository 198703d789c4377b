"""The record is one typed model (bakeoff/results/record.py): the store's columns and the export's columns
come from it, a worker's result that does not fit it is a crash record naming the field (never a string),
and a record an older or newer bakeoff stored still reads."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import bakeoff
from profiled_pass import FakePass
from pydantic import ValidationError

from bakeoff.harness.measure.numerics import error_stats
from bakeoff.harness.worker.main import serialize
from bakeoff.results.record import (
    GROUPS,
    CaseRecord,
    ColdOutput,
    WarmOutput,
    invalid_fields,
)
from bakeoff.results.record_parts import ErrorStats, nested_fields, part_class
from bakeoff.results.stored_record import StoredRecord
from bakeoff.results.schema import RECORD_COLUMNS
from bakeoff.results.schema import records as records_table
from bakeoff.results.store import Store

DATA = Path(__file__).parent / "data"


def test_every_field_is_documented_and_in_one_group():
    seen: dict[str, str] = {}
    for group in GROUPS:
        for name, info in group.model_fields.items():
            assert name not in seen, f"{name} is in {seen[name]} and {group.__name__}"
            seen[name] = group.__name__
            assert info.description, f"{group.__name__}.{name} has no description"
    assert set(seen) == set(CaseRecord.model_fields) - {"legacy_fields"}
    # Every column (a nested part's too) is documented and named once; a part's field names no column.
    columns = [c for group in GROUPS for c in group.declared_columns()]
    names = [c.name for c in columns]
    assert len(names) == len(set(names)) and not set(names) & set(nested_fields(CaseRecord))
    assert set(names) == {c.name for c in CaseRecord.declared_columns()} - {"legacy_fields"}
    assert all(c.description for c in columns)


def test_record_columns_match_the_golden_list():
    # A column added or retyped needs a schema migration (results/migrations.py): update the golden file then.
    got = [f"{c.name} {c.type.compile()}" for c in records_table.columns]
    assert got == (DATA / "records_columns.txt").read_text().split("\n")[:-1]
    assert RECORD_COLUMNS[-1] == "details"


def test_nested_parts_read_as_parts_and_store_as_the_same_columns():
    # Every field of a nested part has its column, and nothing else does.
    for group in GROUPS:
        for name, flat in nested_fields(group).items():
            part = part_class(group.model_fields[name].annotation)
            assert {f for f, _ in flat.columns} == set(part.model_fields), f"{group.__name__}.{name}"
    # Flat columns in, parts to read, the same columns out; nested input gives the same record.
    flat = {"case_id": "a", "status": "ok", "err_rmse_vs_fp64": 0.5, "eager_err_rel_l2_vs_fp64": 0.25,
            "latency_ms_median": 2.0, "eager_latency_ms_median": 3.0, "eager_device_ms": 1.5,
            "headline_ms": 1.0, "headline_method": "timer", "worst_elem_seed": 1}
    rec = CaseRecord.from_columns(flat)
    assert rec.vs_fp64.rmse == 0.5 and rec.eager_vs_fp64.rel_l2 == 0.25 and rec.vs_eager is None
    assert rec.timer.median_ms == 2.0 and rec.eager_timer.median_ms == 3.0
    assert rec.eager_device_time.kernel_sum_ms == 1.5
    assert rec.headline.method == "timer" and rec.worst_elem.seed == 1
    assert rec.model_dump(exclude_unset=True) == flat
    assert CaseRecord(case_id="a", status="ok", vs_fp64=ErrorStats(rmse=0.5), headline={"median_ms": 1.0}
                      ).model_dump(exclude_unset=True) == {"case_id": "a", "status": "ok", "err_rmse_vs_fp64": 0.5,
                                                           "headline_ms": 1.0}
    assert {k: v for k, v in rec.to_columns().items() if v is not None} == flat
    # A wrong value in a part names its column.
    with pytest.raises(ValidationError) as exc:
        CaseRecord.from_columns({**flat, "eager_kernel_times": [{"name": 1}]})
    assert invalid_fields(exc.value).startswith("eager_kernel_times.0.name: ")


def test_export_columns_match_the_golden_list():
    # The exports' columns (json, csv, parquet) are a contract with their readers: names and order.
    assert StoredRecord.export_columns() == (DATA / "export_columns.txt").read_text().split("\n")[:-1]


def test_error_stats_fields_are_record_fields():
    stats = error_stats(torch.ones(4), torch.ones(4, dtype=torch.float64))
    for suffix, prefix in (("vs_fp64", "err"), ("vs_eager", "err"), ("vs_fp64", "eager_err")):
        ColdOutput.model_validate(stats.as_dict(suffix, prefix))  # an ErrorStats field the model lacks fails


def test_worker_serializes_through_the_model():
    ok = json.loads(serialize({"status": "ok", "compile_s": 1.5, "err_max_abs_vs_fp64": math.inf,
                               "timing_windows_epoch_s": [[1.0, 2.0]]}, ColdOutput))
    assert ok == {"status": "ok", "compile_s": 1.5, "err_max_abs_vs_fp64": math.inf,
                  "timing_windows_epoch_s": [[1.0, 2.0]]}
    unknown = json.loads(serialize({"status": "ok", "made_up_field_s": 1.0}, ColdOutput))
    assert unknown["status"] == "crash" and "made_up_field_s: not a record field" in unknown["reason"]
    odd = json.loads(serialize({"compile_warm_s": 1.0, "compile_stages_warm_s": {"build": object()}}, WarmOutput))
    assert odd["status"] == "crash" and "compile_stages_warm_s.build" in odd["reason"]
    assert "object" in odd["reason"]


def test_store_refuses_unknown_fields_and_reads_foreign_ones(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run_id = store.create_run(config_name="c", config_path=None, config_text="", device="cpu", environment={},
                              n_cases=2)
    with pytest.raises(ValidationError, match="made_up_field_s"):
        store.add_record(run_id, {"case_id": "a", "status": "ok", "made_up_field_s": 1.0})
    with pytest.raises(ValidationError, match="status"):
        store.add_record(run_id, {"case_id": "a"})  # every record has an outcome
    assert store.add_record(run_id, CaseRecord(case_id="a", status="ok", latency_ms_median=2.0,
                                               compile_notes=["n"], ceiling={"name": "copy_gbps", "value": 10.0}))
    (row,) = store.records(run_id)
    assert row["latency_ms_median"] == 2.0 and row["details"] == {
        "compile_notes": ["n"], "ceiling": {"name": "copy_gbps", "value": 10.0}}  # only what was measured
    # A row written by another bakeoff: a field this one does not know, and one of another type.
    foreign = {**row, "id": 7, "case_id": "b", "kernel_count": None, "status": "a_newer_status",
               "details": {"future_metric_ms": 3.5, "compile_notes": "one note, not a list"}}
    rec = StoredRecord.from_row(foreign)
    assert rec.case_id == "b" and rec.timer.median_ms == 2.0 and rec.compile_notes is None
    assert rec.status == "a_newer_status"  # read as written
    assert rec.legacy_fields == {"future_metric_ms": 3.5, "compile_notes": "one note, not a list"}
    flat = rec.flat()
    assert flat["future_metric_ms"] == 3.5 and list(flat)[:4] == ["run_id", "id", "created_at", "case_id"]


# --- Fields only a GPU writes: the real producers, fed what CUPTI, NVML and the timer would give ---------

def _gpu_figures(monkeypatch, profiled: bool) -> dict:
    """measure_figures on "cuda:0" with the device calls replaced by their results, so that the record
    parts it assembles are the real ones."""
    from dataclasses import replace

    from bakeoff.harness.measure import figures
    from bakeoff.harness.measure.clocks import ClockSampler
    from bakeoff.harness.measure.device_time import CallTimes, ProfileError, figures_of
    from bakeoff.harness.measure.timing import TimedCall, stats

    def measure(targets, device, **_):
        for t in targets:
            t.samples_ms.extend([1.0, 1.1, 0.9, 1.0, 1.05] * 4)
        return {t.name: stats(t.samples_ms, "cuda-events(batch 8 behind a spin kernel)") for t in targets}

    def profile(targets, device, calls, flush_l2, **_):
        if not profiled:
            raise ProfileError("profiler saw 3 marker kernels for 2 calls")
        return {t.name: replace(figures_of([CallTimes(0.8, 0.7, 2, (("triton_poi_fused_0", 500.0), ("gemm", 200.0)))
                                            for _ in range(calls)]), windows_s=[(i, i + 0.5) for i in range(calls)])
                for t in targets}

    class Clock(ClockSampler):
        def __enter__(self):
            self.samples_mhz = [1980, 1965, 1755] if profiled else []  # the second run: NVML gave none
            self.times_s = [0.2, 1.2, 3.7] if profiled else []
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(figures, "measure", measure)
    monkeypatch.setattr(figures, "host_latency", lambda call, sync, device, budget_s: stats([1.2, 1.3], "host"))
    monkeypatch.setattr(figures, "pipelined_latency", lambda *a, **k: stats([0.95, 0.97], "pipelined"))
    def graph_replay(call, calls_per_graph=10, **_):
        if not profiled:  # the second run: capture fails too
            raise RuntimeError("operation not permitted when stream is capturing")
        return stats([0.9, 0.9, 0.9], f"cuda-graph-replay x{calls_per_graph}")

    monkeypatch.setattr(figures, "cuda_graph_latency_ms", graph_replay)
    monkeypatch.setattr(figures, "run_pass", lambda *a, **k: FakePass(lambda: profile(*a, **k)))
    monkeypatch.setattr(figures, "sustain_load", lambda targets, seconds, device: seconds)
    monkeypatch.setattr(figures, "ClockSampler", Clock)
    backend = TimedCall(figures.BACKEND_TARGET, lambda: None, lambda: None, True)
    eager = TimedCall(figures.EAGER_TARGET, lambda: None, lambda: None, True)
    timing = {"warmup_s": 0.01, "budget_s": 0.1, "min_reps": 5, "max_reps": 100, "target_iqr": 0.05,
              "flush_l2": True, "sustained_s": 0.5, "profile_calls": 4}
    return figures.measure_figures(backend, eager, "cuda:0", timing, capturable=True, bytes_per_call=4096)


def test_gpu_timing_fields_are_declared(monkeypatch):
    from bakeoff.harness.measure.noise import assess
    from bakeoff.harness.measure.figures import TOP_UP_S

    out = _gpu_figures(monkeypatch, profiled=True)
    assert out["headline_method"] == "cupti-span" and out["kernel_times"][0]["name"] == "triton_poi_fused_0"
    out.update(assess(out, 0.05, paired=True))
    rec = ColdOutput.model_validate({**out, "status": "ok"})  # every CUPTI, clock, pipelined field is declared
    assert rec.device_time.kernel_times[0].launches == 1.0 and rec.eager_device_time.kernel_times
    assert rec.sm_clock_mhz_min == 1755 and 0.0 <= rec.headline_sm_clock_low_share <= 1.0
    assert rec.headline_sm_clock_mhz_min <= rec.headline_sm_clock_mhz_max and rec.speedup_quality is not None
    assert rec.device_time.span_samples_ms == [0.8] * 4 and rec.eager_device_time.profiled_calls == 4
    assert rec.device_time.span_sm_clock_mhz == [1980, 1965, 1965, 1755]  # inside its window, else the nearest
    # calls without marker readings: NVML's per-call clock, and the headline's clock figures from NVML too
    assert rec.device_time.span_sm_clock_source == "nvml" and rec.headline_sm_clock_source == "nvml"
    assert rec.sustained_s == pytest.approx(0.5 + TOP_UP_S)
    # a 1 ms call (the timer's median): two calls per captured graph (about 2 ms of work)
    assert rec.graph_latency_method == "cuda-graph-replay x2" and rec.graph_replays == 3
    fallback = _gpu_figures(monkeypatch, profiled=False)
    rec = ColdOutput.model_validate({**fallback, "status": "ok"})
    assert "marker kernels" in rec.profile_error and rec.headline.method == "pipelined"
    assert rec.headline.fallback.startswith("no CUPTI span") and "capturing" in rec.graph_latency_error
    assert rec.sm_clock_error == "no sample taken" and rec.sm_clock_mhz is None


def test_gpu_load_and_ceiling_fields_are_declared():
    from bakeoff.harness.measure.ceiling_share import ceiling_fields
    from bakeoff.harness.measure.load_watch import LoadWatch, others_than_me
    from bakeoff.harness.measure.noise import assess

    watch = LoadWatch("cpu")
    with watch:
        pass

    class Gpu:  # what GpuWatch found: one process with utilization samples, one context of unknown activity
        others = others_than_me({7: {"pid": 7, "sm_util_pct": 30, "mem_util_pct": 2},
                                 8: {"pid": 8, "activity": "unknown"},
                                 9: {"pid": 9, "sm_util_pct": 90, "mem_util_pct": 5}}, my_pid=1)
        error = "per-process utilization unavailable (Not Supported): listing compute contexts"

    watch.gpu = Gpu()
    fields = watch.fields()
    fields.update(assess({**fields, "samples_ms": [1.0] * 20, "latency_iqr_rel": 0.0}, 0.05, paired=False))
    rec = ColdOutput.model_validate({**fields, "status": "ok"})
    assert rec.gpu_other_processes[0].pid_namespace_unknown and rec.measurement_quality == "noisy"
    assert rec.gpu_process_error and rec.noise_reasons
    # a case that beat its measured ceiling, with the datasheet's peak known
    shares = ceiling_fields({"achieved_gbps": 5000.0}, ("copy_gbps", 4000.0), {"spec_copy_gbps": 4800.0})
    rec = CaseRecord.model_validate({"case_id": "a", "status": "ok", **shares})
    assert rec.ceiling.raised_to == 5000.0 and rec.ceiling_exceeded and rec.pct_of_ceiling == 100.0
    assert rec.pct_of_spec_peak > 100.0
    assert rec.model_dump()["ceiling"] == {"name": "copy_gbps", "value": 4000.0, "raised_to": 5000.0}


# --- Every record path of a real run writes declared fields only, and every declared field has a writer ---

PATHS_CONFIG = """
name: paths
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends:
  eager: {}
  correct: {backend: faulty, mode: none}
  stale_cache: {backend: faulty, mode: stale_cache}
  wrong_after: {backend: faulty, mode: wrong_after, calls: 2}
  compile_error: {backend: faulty, mode: compile_error}
  run_error: {backend: faulty, mode: run_error}
  abort: {backend: faulty, mode: abort}
  hang: {backend: faulty, mode: hang}
  bad_info: {backend: faulty, mode: bad_info}
  extra: {backend: faulty}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 5}  # 5: the speedup interval needs 5 pairs
compile: {warm: true}
timeout_s: 20
"""

# Fields this CPU run cannot write, and where their writer is exercised instead.
NOT_ON_THIS_RUN = {
    # A training step's or a sweep's fields: their CLI runs (tests/test_grad_cli.py, tests/test_sweep.py) would
    # end as `crash` naming the field if one were undeclared.
    **dict.fromkeys(["output_errors", "worst_output"], "training steps and graphs of several outputs: test_grad_cli"),
    **dict.fromkeys(["sweep", "sweep_compile_counter", "sweep_compiles", "sweep_dim", "sweep_point_budget_s",
                     "sweep_points", "sweep_points_ok", "sweep_recompiled_at", "sweep_serve_s", "sweep_serving",
                     "sweep_setup_s", "sweep_values"], "shape sweeps: test_sweep"),
    **dict.fromkeys(["device_span_ms", "device_span_p20_ms", "device_span_p80_ms", "device_span_iqr_rel",
                     "device_span_samples_ms", "device_span_sm_clock_mhz", "eager_device_span_sm_clock_mhz",
                     "device_ms", "device_ms_p20", "device_ms_p80", "kernel_count",
                     "profiled_calls", "kernel_times", "eager_device_span_ms", "eager_device_span_p20_ms",
                     "eager_device_span_p80_ms", "eager_device_span_iqr_rel", "eager_device_span_samples_ms",
                     "eager_device_ms", "eager_device_ms_p20", "eager_device_ms_p80", "eager_kernel_count",
                     "eager_profiled_calls", "eager_kernel_times", "launch_overhead_share", "profile_error",
                     "headline_fallback", "graph_latency_ms", "graph_latency_method", "graph_replays",
                     "graph_latency_error", "sm_clock_mhz", "sm_clock_mhz_min", "headline_sm_clock_mhz_median",
                     "headline_sm_clock_mhz_min", "headline_sm_clock_low_share", "headline_sm_clock_mhz_max",
                     "sm_clock_mhz_max", "sm_clock_samples", "sm_clock_error", "sustained_s",
                     "headline_sm_clock_source", "device_span_sm_clock_source", "eager_device_span_sm_clock_source"],
                    "GPU timing: test_gpu_timing_fields_are_declared"),
    **dict.fromkeys(["device_span_sm_clock_edges_mhz", "device_span_sm_clock_error",
                     "eager_device_span_sm_clock_edges_mhz", "eager_device_span_sm_clock_error"],
                    "the markers' clock readings: tests/test_marker_clock.py"),
    **dict.fromkeys(["device_span_sm_clock_sampler_error", "eager_device_span_sm_clock_sampler_error"],
                    "why the PM sampler gave no clock: tests/test_pm_sampler.py"),
    **dict.fromkeys(["gpu_state_before", "gpu_state_after"], "GPU only: test_gpu_state_fields_are_declared"),
    **dict.fromkeys(["gpu_other_processes", "gpu_process_error", "ceiling", "ceiling_exceeded", "pct_of_ceiling",
                     "pct_of_ceiling_measured", "pct_of_spec_peak"],
                    "GPU load and calibrated ceilings: test_gpu_load_and_ceiling_fields_are_declared"),
    **dict.fromkeys(["node_hardware_id", "node_fingerprint", "artifacts_error"], "Ray: tests/test_ray.py"),
    "rerun_alone_reason": "out of memory beside other slots: tests/test_faults.py (--jobs 2)",
    **dict.fromkeys(["warm_error", "compile_process_setup_warm_error", "stderr_tail_warm", "worker_start_reason",
                     "worker_start_warm_reason"], "only when a warm worker fails or prints, or a worker starts "
                    "fresh for a reason (tests/test_prestart.py)"),
    **dict.fromkeys(["latency_drift_rel", "eager_drift_rel", "speedup_drift_rel", "host_other_cpu_share"],
                    "judged only with 15 samples or pairs or more, and over 100 clock ticks of the CPUs: "
                    "tests/test_noise.py, tests/test_speedup_quality.py"),
    "sm_clock_events": "NVML's clock event reasons with the clock samples: "
                       "test_clock_sampler_counts_nvmls_clock_event_reasons_over_its_samples",
    "break_even_calls": "only for a backend faster than eager",
    "legacy_fields": "read side: test_store_refuses_unknown_fields_and_reads_foreign_ones",
}


# Loaded by every Python process of the run (PYTHONPATH): the workers of the case labelled `extra` return one
# field more than the record model has, as a worker of a newer bakeoff, or a harness change that forgot the
# model, would.
SITECUSTOMIZE = """
import bakeoff.harness.worker.cold as cold

_run_cold = cold.run_cold

def run_cold(case, *args, **kwargs):
    out = _run_cold(case, *args, **kwargs)
    return {**out, "made_up_field_s": 1.0} if case.label == "extra" else out

cold.run_cold = run_cold
"""


@pytest.fixture(scope="module")
def paths_run(tmp_path_factory) -> dict:
    """One real run of PATHS_CONFIG (--jobs 2), with SITECUSTOMIZE loaded in every process; its export."""
    tmp_path = tmp_path_factory.mktemp("paths")
    (tmp_path / "paths.yaml").write_text(PATHS_CONFIG)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", f"{tmp_path / 'site'}:{Path(__file__).resolve().parent.parent}")
        db = f"sqlite:///{tmp_path / 'p.db'}"
        bakeoff("run", "paths.yaml", "--jobs", "2", "--db", db, cwd=tmp_path, check=True)
        rows = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
        out = tmp_path / "r.csv"
        bakeoff("export", "latest", "--format", "csv", "-o", str(out), "--db", db, cwd=tmp_path, check=True)
    return {"rows": rows, "csv": pd.read_csv(out)}


def test_results_that_do_not_fit_the_model_are_crash_records(paths_run):
    got = {r["backend"]: r for r in paths_run["rows"]}
    assert got["eager"]["status"] == "ok" and got["eager"]["latency_ms_median"] > 0
    bad, extra = got["bad_info"], got["extra"]
    assert bad["status"] == "crash", bad
    assert "compile_notes.1: Input should be a valid string (got RuntimeError)" in bad["reason"]
    assert extra["status"] == "crash", extra
    assert "made_up_field_s: not a record field (declare it in bakeoff/results/record.py)" in extra["reason"]
    assert all(r["latency_ms_median"] is None for r in (bad, extra))  # nothing of an unfit result is kept
    assert extra["worker"].startswith("cpu#") and extra["case_id"].endswith("/extra")  # but the case and process are

    # Every export has the model's columns, in its order, whatever each record measured.
    columns = StoredRecord.export_columns()
    assert all(list(r) == columns for r in got.values())
    frame = paths_run["csv"]
    assert list(frame.columns) == columns and len(frame) == len(got)


def test_every_record_path_writes_declared_fields_and_every_field_has_a_writer(paths_run):
    rows = [r for r in paths_run["rows"] if r["backend"] not in ("bad_info", "extra")]
    got = {r["backend"]: r for r in rows}
    status = {k: (r["status"], r["reason"]) for k, r in got.items()}
    # Each path ended as its own status: none of them is a crash for a field the model lacks.
    assert {k: s for k, (s, _) in status.items()} == {
        "eager": "ok", "correct": "ok", "stale_cache": "mismatch", "wrong_after": "mismatch",
        "compile_error": "compile_error", "run_error": "runtime_error", "abort": "crash", "hang": "timeout"}, status
    assert not any("record model" in (r or "") for _, r in status.values()), status
    columns = StoredRecord.export_columns()
    assert all(list(r) == columns for r in rows)  # no legacy field: nothing this bakeoff wrote is unknown to it
    assert got["correct"]["warm_check"] == "ok" and got["stale_cache"]["warm_check"] == "mismatch"
    assert got["wrong_after"]["post_timing_check"] == "mismatch"
    written = {k for r in rows for k, v in r.items() if v is not None}
    declared = set(columns) | {"legacy_fields"}
    assert set(NOT_ON_THIS_RUN) <= declared, set(NOT_ON_THIS_RUN) - declared
    unwritten = declared - written - set(NOT_ON_THIS_RUN)
    assert not unwritten, f"declared, but no record path of this run writes them: {sorted(unwritten)}"


def test_gpu_state_fields_are_declared(monkeypatch):
    import bakeoff.harness.measure.environment as environment

    class Nvml:  # what pynvml answers on an H200 at rest
        NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0
        nvmlClocksThrottleReasonGpuIdle = 1
        nvmlClocksThrottleReasonSwPowerCap = 4

        def nvmlDeviceGetCurrentClocksEventReasons(self, h):
            return 5

        def nvmlDeviceGetClockInfo(self, h, which):
            return (1980, 3201)[which]

        def nvmlDeviceGetTemperature(self, h, sensor):
            return 41

        def nvmlDeviceGetPowerUsage(self, h):
            return 117250

    monkeypatch.setattr(environment, "_nvml", lambda: Nvml())
    monkeypatch.setattr(environment, "_nvml_handle", lambda nv, index: object())
    state = environment.gpu_state("cuda:0")
    rec = ColdOutput.model_validate({"status": "ok", "gpu_state_before": state,
                                     "gpu_state_after": {"error": "NVML unavailable"}})
    assert rec.gpu_state_before.throttle_reasons == ["GpuIdle", "SwPowerCap"] and rec.gpu_state_before.power_w == 117.25
    assert json.loads(rec.model_dump_json(exclude_unset=True))["gpu_state_after"] == {"error": "NVML unavailable"}
