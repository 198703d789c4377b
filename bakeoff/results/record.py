"""The record of one case: one typed model (`CaseRecord`), owned here, each phase filling its own group:

    CaseFields     the orchestrator, from the planned case (what was asked for)
    Outcome        any phase: the status and why
    CompileFields  the cold worker: compile time, stages, cache, artifacts summary
    CheckFields    the cold worker: errors against fp64 and eager on every seed (`ErrorStats` three times:
                   vs_fp64, vs_eager, eager_vs_fp64), the worst element
    TimingFields   the cold worker: every latency figure of the backend and of eager interleaved with it (one
                   part per method, eager's the `eager_*` mirror), CUDA graph, SM clock, throughput, the gate
    LoadFields     the cold worker: what else ran while it timed, and the measurement quality judged
    DeviceState    the cold worker: GPU clocks, power and throttling before and after
    WarmFields     the warm worker: compile time in a fresh process with the cold caches
    ProcessFields  the harness around the workers: slot, wall time and phases, spares, output tails, artifacts
    RunFields      the orchestrator, as it commits: attempt, ceiling

Code holding a record reads its nested parts (results/record_parts.py): `record.vs_fp64.rmse`,
`record.eager_headline.median_ms`. Everything outside the model sees flat columns (`err_rmse_vs_fp64`,
`eager_headline_ms`): a record validates from them (`CaseRecord.from_columns`, or any constructor) and dumps
to them (`model_dump`, `to_columns`, `flat`); the store's columns (results/schema.py), the exports' and the
reports' flat cases come from here. The workers write a `ColdOutput` or a `WarmOutput` through the model: a
field it lacks, or a value JSON cannot hold, makes a `crash` record naming the field, never a silent string.
To add a field: one line in its group, typed as precisely as the data allows, unit in its name, with a
description (docs/ARCHITECTURE.md, "Adding a record field"); it goes to `details` unless marked `InTable`
(a column also needs a schema migration, results/migrations.py). None means "not measured"; NaN never
reaches the store.
"""
from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, JsonValue, ValidationError

from bakeoff.results.record_parts import (
    COLUMN,
    BackendTimer,
    Ceiling,
    CheckStatus,
    DEVICE_TIME_COLUMNS, EAGER_DEVICE_TIME_COLUMNS,
    HEADLINE_COLUMNS,
    HOST_COLUMNS,
    PIPELINED_COLUMNS,
    TIMER_COLUMNS,
    WORST_ELEMENT_COLUMNS,
    DeviceTime, ErrorStats, FigureQuality,
    GpuProcess,
    GpuState,
    Headline,
    InTable,
    KernelTime,
    Pipelined,
    Spread,
    Status,
    Timer,
    WorstElement,
    _Group,
    column_of,
    doc,
    error_columns,
)

__all__ = ["GROUPS", "COLUMN", "CaseRecord", "Ceiling", "ColdOutput", "ErrorStats", "GpuProcess", "GpuState",
           "InTable", "KernelTime", "WarmOutput", "doc", "invalid_fields"]


class CaseFields(_Group):
    """What was asked for: the planned case (harness/plan/cases.py), copied by the orchestrator."""

    case_id: Annotated[str, COLUMN] = Field(description="workload/shape/dtype/backend label; unique in a run")
    workload: Annotated[str | None, InTable(128)] = doc("workload name")
    preset: Annotated[str | None, InTable(32)] = doc("shape preset the shape came from")
    shape: Annotated[str | None, COLUMN] = doc("bound dimensions, e.g. 'M=64,N=256'")
    dtype: Annotated[str | None, InTable(16)] = doc("element type, e.g. float32")
    backend: Annotated[str | None, COLUMN] = doc("the backend's label in the config")
    adapter: str | None = doc("the registered backend that ran it (= backend unless the config says `backend:`)")
    device: Annotated[str | None, InTable(32)] = doc("device the case was planned on")
    flops: Annotated[float | None, COLUMN] = doc("analytic floating-point operations per call")
    bytes_moved: Annotated[float | None, COLUMN] = doc("analytic minimum bytes read and written per call")
    dims: dict[str, int] | None = doc("bound dimensions by name")
    options: dict[str, JsonValue] | None = doc("the backend's options from the config")
    seeds: list[int] | None = doc("input seeds checked (the first is also timed)")
    inputs: dict[str, str] | None = doc("how each graph input is filled, in words, by input name "
                                        "(workloads/inits.py describe_inputs)")
    graph_digest: str | None = doc("16 hex digits of SHA-256 over the bound graph's nodes and outputs "
                                   "(harness/plan/digests.py)")
    options_digest: str | None = doc("16 hex digits of SHA-256 over the backend options, defaults filled in")
    timing_digest: str | None = doc("16 hex digits of SHA-256 over timing_settings")
    timing_settings: dict[str, JsonValue] | None = doc("the timing settings that change what a sample measures "
                                                       "(all but the stopping rule)")
    grad: bool | None = doc("a training step: forward + backward of sum(outputs x fixed random cotangents), "
                            "gradients for every input (workloads/grad.py); `workload` then ends in (fwd+bwd)")
    sweep_dim: str | None = doc("the swept dim of a shape sweep (harness/config/sweep.py)")
    sweep_values: list[int] | None = doc("its values, in serving order")


class Outcome(_Group):
    """The verdict, from whichever phase decided it."""

    status: Annotated[Status | None, InTable(16)] = doc("ok, skipped, mismatch, compile_error, runtime_error, "
                                                        "timeout, oom or crash")
    reason: Annotated[str | None, COLUMN] = doc("why the status is not ok; None when ok")
    traceback: str | None = doc("the exception's traceback (last 4000 characters)")


class CompileFields(_Group):
    """The cold worker's compile, in a fresh process with empty caches."""

    compile_s: Annotated[float | None, COLUMN] = doc("headline compile seconds: the compiler's own stages where the "
                                                     "backend names them, else compile + prepare + first run + sync")
    compile_total_s: float | None = doc("seconds from the graph to the first result (compile, load or session, "
                                        "first run, sync), less compile_gate_wait_s")
    compile_gate_wait_s: float | None = doc("seconds the cold compile waited for the device's gate (not counted)")
    compile_stages_s: dict[str, float] | None = doc("seconds per stage, as the backend reports them")
    compile_notes: list[str] | None = doc("the backend's notes on its compile")
    cache_hit_cold: bool | None = doc("the backend's own cache-hit report, cold")
    cache_files_cold: int | None = doc("files the cold compile wrote to its cache folders")
    cache_files_before_cold: int | None = doc("files in the cache folders before the cold compile (0: empty)")
    compile_process_setup_s: float | None = doc("seconds of the process's one-time start: a tiny unrelated "
                                                "graph compiled and run first (run/worker/process_setup.py)")
    cache_files_setup: int | None = doc("files that tiny graph wrote to the cache folders")
    compile_process_setup_error: str | None = doc("why the tiny graph failed (the case runs without the split)")
    compile_setup_in_case_reason: str | None = doc("why the backend's process warm-up is paid in the case's own "
                                                   "process rather than ahead of time in a spare worker")
    lowering: dict[str, str] | None = doc("the route each composite op took into the framework, in words, by "
                                          "op name (e.g. sdpa: 'native: ONNX Attention (opset 23)')")
    artifacts: dict[str, JsonValue] | None = doc("summary of the compiled artifacts (<name>_bytes per file "
                                                 "written, numbers the backend gave)")


class CheckFields(_Group):
    """The numeric check of every seed's outputs: the worst seed's figures (harness/measure/checks.py)."""

    eager_deterministic: Annotated[bool | None, COLUMN] = doc("two eager runs gave the same bits")
    err_ratio_vs_eager: Annotated[float | None, COLUMN] = doc("RMSE vs fp64 over eager's RMSE vs fp64")
    checked_seeds: list[int] | None = doc("seeds whose outputs were checked")
    check_problems: list[str] | None = doc("problems seen on any seed (e.g. output dtype)")
    reference_source: dict[str, Literal["shared", "computed"]] | None = doc(
        "by seed: the float64 reference read from the run's shared copy or computed by this worker")
    output_errors: dict[str, dict[str, JsonValue]] | None = doc(
        "by output name (out0.., grad:<input> for a training step): that output's worst seed: status, reason, "
        "err_{rel_l2,rmse,max_abs,max_scaled}_vs_fp64, eager_err_rmse_vs_fp64, err_ratio_vs_eager, seed "
        "(non-finite as 'inf'/'nan'); for graphs of several outputs")
    worst_output: str | None = doc("the output the case's verdict is about (a key of output_errors)")
    post_timing_check: CheckStatus | None = doc("one more call after the timed loop, checked like the first seed")
    post_timing_check_reason: str | None = doc("why that check failed; None when it passed")
    worst_elem: Annotated[WorstElement | None, WORST_ELEMENT_COLUMNS] = doc(
        "the worst element of the worst output (harness/measure/worst_element.py)")
    vs_fp64: Annotated[ErrorStats | None, error_columns("err_{}_vs_fp64", (
        "max_abs", "max_rel", "rel_l2", "rmse", "cosine", "ulp_max", "ulp_p99"))] = doc(
        "the backend vs the fp64 reference (harness/measure/numerics.py)")
    vs_eager: Annotated[ErrorStats | None, error_columns("err_{}_vs_eager", ("max_abs", "rel_l2"))] = doc(
        "the backend vs eager")
    eager_vs_fp64: Annotated[ErrorStats | None, error_columns("eager_err_{}_vs_fp64", ("rel_l2", "rmse"))] = doc(
        "eager vs the fp64 reference")


class TimingFields(_Group):
    """Every latency figure of the backend and of eager interleaved with it (harness/measure/figures.py), the
    headline that means the same for every backend, kernels, SM clock, throughput, and the timing gate."""

    timer: Annotated[BackendTimer | None, TIMER_COLUMNS] = doc("the timer")
    eager_timer: Annotated[Timer | None, TIMER_COLUMNS.mirror("eager_", ("median_ms", "p20_ms", "p80_ms", "samples_ms",
                                                                  "method"), in_table=("median_ms",))] = doc(
        "eager's timer, interleaved (timed by the backend's method)")
    speedup_vs_eager: Annotated[float | None, COLUMN] = doc("eager's headline_ms over the backend's (both by "
                                                            "the headline method, below)")
    speedup_vs_eager_ci_low: float | None = doc("speedup_vs_eager's 95% interval, low (results/speedup_interval.py)")
    speedup_vs_eager_ci_high: float | None = doc("its high end (None for both: no paired samples)")
    timer_speedup_vs_eager: float | None = doc("eager's timer median over the backend's")
    sustained_s: float | None = doc("seconds of continuous load before timing and profiling (timing.sustained_s; "
                                    "auto: 0.3 s, then 0.05 s before the CUPTI pass, on a GPU; none on the CPU)")
    host: Annotated[Spread | None, HOST_COLUMNS] = doc("one call synchronized before and after, host clock, dispatch "
                                                "included")
    eager_host: Annotated[Spread | None, HOST_COLUMNS.mirror("eager_", ("median_ms", "p20_ms", "p80_ms"))] = doc(
        "eager's synchronized call")
    pipelined: Annotated[Pipelined | None, PIPELINED_COLUMNS] = doc("many calls enqueued, one synchronize, per call")
    eager_pipelined: Annotated[Pipelined | None, PIPELINED_COLUMNS.mirror(
        "eager_", ("median_ms", "p20_ms", "p80_ms", "calls"))] = doc("eager's calls, pipelined")
    # CUDA graph replay
    graph_latency_ms: Annotated[float | None, COLUMN] = doc("median ms per call replayed from a CUDA graph")
    graph_latency_method: str | None = doc("how graph_latency_ms was taken: calls per captured graph")
    graph_replays: int | None = doc("replays behind graph_latency_ms")
    graph_latency_error: str | None = doc("why CUDA graph capture failed")
    device_time: Annotated[DeviceTime | None, DEVICE_TIME_COLUMNS] = doc("CUPTI's device time (GPU only)")
    eager_device_time: Annotated[DeviceTime | None, EAGER_DEVICE_TIME_COLUMNS] = doc(
        "CUPTI's device time of eager's calls")
    launch_overhead_share: Annotated[float | None, COLUMN] = doc("1 - device_ms over the single synchronized "
                                                                 "call's latency")
    profile_error: str | None = doc("why the profiler gave no device figures")
    headline: Annotated[Headline | None, HEADLINE_COLUMNS] = doc("the headline, the same method for every backend")
    eager_headline: Annotated[Spread | None, HEADLINE_COLUMNS.mirror(
        "eager_", ("median_ms", "p20_ms", "p80_ms"))] = doc("eager's headline, by the same method")
    # the SM clock while timing (harness/measure/clocks.py), GPU only
    sm_clock_mhz: float | None = doc("median SM clock during timing and profiling, MHz")
    sm_clock_mhz_min: int | None = doc("lowest SM clock sampled, MHz")
    sm_clock_mhz_max: int | None = doc("highest SM clock sampled, MHz")
    headline_sm_clock_mhz_median: float | None = doc("median SM clock over the headline's samples, MHz")
    headline_sm_clock_mhz_min: int | None = doc("lowest SM clock over the headline's samples, MHz")
    headline_sm_clock_low_share: float | None = doc("share of those clock samples over 10% under their median")
    sm_clock_samples: int | None = doc("SM clock samples taken")
    sm_clock_events: dict[str, float] | None = doc("share of those samples each NVML clock event reason was set")
    sm_clock_error: str | None = doc("why the SM clock was not (fully) sampled")
    # the timing gate (harness/supervise/gate.py)
    gate: str | None = doc("the device's timing gate")
    gate_policy: Literal["exclusive", "timers_only", "beside_compiles"] | None = doc(
        "exclusive: nothing else on the device while a case times; timers_only: only timing phases serialized; "
        "beside_compiles: no other device work while it times, other cases' host-side compiles go on")
    gate_policy_reason: str | None = doc("why the case ran under that policy (run/gate_policy.py; `auto` resolved)")
    gate_wait_s: float | None = doc("seconds waited for the timing gate before timing")
    timing_windows_epoch_s: list[tuple[float, float]] | None = doc("(start, end) epoch s: the timing gate held alone")
    compile_windows_epoch_s: list[tuple[float, float]] | None = doc(
        "(start, end) epoch seconds of the cold and warm processes' compiles, gate waits inside not counted")
    achieved_gbps: Annotated[float | None, COLUMN] = doc("bytes_moved per headline call, GB/s")
    achieved_tflops: Annotated[float | None, COLUMN] = doc("flops per headline call, TFLOP/s")
    break_even_calls: Annotated[float | None, COLUMN] = doc("compile_total_s over the headline time saved per call")


class LoadFields(_Group):
    """What else ran while the case timed (harness/measure/load_watch.py), and the quality judged from it and
    from the samples (harness/measure/noise.py)."""

    timing_window_s: float | None = doc("seconds the load was watched (the timing window)")
    host_cpus: float | None = doc("CPUs this worker may run on (affinity, capped by the cgroup quota)")
    host_other_cpu_share: float | None = doc("other processes' CPU time on those CPUs over window x host_cpus")
    host_run_delay_share: float | None = doc("time the timing thread waited for a CPU over the window")
    host_load_avg: tuple[float, float] | None = doc("1-minute load average at the window's start and end")
    gpu_other_processes: list[GpuProcess] | None = doc("other processes on the GPU during timing")
    gpu_process_error: str | None = doc("why NVML could not tell which processes used the GPU")
    measurement_quality: Literal["clean", "noisy"] | None = doc("the case's summary: noisy when any rule fired")
    noise_reasons: list[str] | None = doc("each noise rule that fired, with who and by how much")
    headline_quality: Literal["clean", "clock", "noisy"] | None = doc(
        "the headline's own quality (marks and compare); 'clock': its spread is the SM clock's, steady in cycles")
    headline_noise_reasons: list[str] | None = doc("each rule that fired for the headline")
    host_quality: Literal["clean", "noisy"] | None = doc("the host-clock figures' quality (host load)")
    host_noise_reasons: list[str] | None = doc("each rule that fired for the host-clock figures")
    latency_drift_rel: float | None = doc("spread of the backend's third-medians over the smallest (None: <15)")
    eager_drift_rel: float | None = doc("the same for the interleaved eager")
    eager_iqr_rel: float | None = doc("the interleaved eager's interquartile range over its median")


class DeviceState(_Group):
    """GPU state sampled by the cold worker (harness/measure/environment.py gpu_state); None on the CPU."""

    gpu_state_before: GpuState | None = doc("clocks, temperature, power and throttle reasons before the case")
    gpu_state_after: GpuState | None = doc("the same, after timing")


class SweepFields(_Group):
    """A shape sweep's serving (harness/worker/shape_sweep.py; docs/WORKLOADS.md "Shape sweeps")."""

    sweep: list[dict[str, JsonValue]] | None = doc(
        "one point per value in serving order: value, dims, new_shape, first_result_s (s), recompiled, "
        "compiles_so_far, status, reason, checked_seeds, err_* figures, headline_ms (+ p20/p80, iqr, n, method, "
        "fallback), host_latency_ms, achieved_gbps/tflops; tritongen adds kernel_sources_so_far (int: generated "
        "source sets) and triton_compiles_so_far (int, None under the interpreter: Triton's compiled kernels)")
    sweep_point_budget_s: float | None = doc("timing budget of each point, seconds")
    sweep_serving: str | None = doc("how the backend served the sweep, in words")
    sweep_compile_counter: str | None = doc("where the compile count comes from (the backend's own counter)")
    sweep_setup_s: float | None = doc("seconds to set the server up before the first point")
    sweep_compiles: int | None = doc("compiles the backend made over the sweep, from its counter")
    sweep_serve_s: float | None = doc("setup plus every point's first result, seconds: the time to serve the sweep")
    sweep_points: int | None = doc("points served")
    sweep_points_ok: int | None = doc("points whose check passed")
    sweep_recompiled_at: list[int] | None = doc("values at which the backend compiled again")


class WarmFields(_Group):
    """The warm compile: a second fresh process reusing the caches the cold one filled."""

    compile_warm_s: Annotated[float | None, COLUMN] = doc("headline compile seconds, warm")
    compile_warm_total_s: float | None = doc("seconds to the first result, warm")
    cache_hit_warm: Annotated[bool | None, COLUMN] = doc("the warm compile came from the cache (the backend's "
                                                         "report, else no new cache file)")
    cache_files_before_warm: int | None = doc("cache files before the warm compile")
    cache_files_after_warm: int | None = doc("cache files after the warm compile")
    compile_stages_warm_s: dict[str, float] | None = doc("seconds per stage, warm")
    compile_process_setup_warm_s: float | None = doc("seconds of the warm process's one-time start (tiny graph)")
    cache_files_setup_warm: int | None = doc("files the tiny graph wrote to the cache folders, warm")
    compile_process_setup_warm_error: str | None = doc("why the tiny graph failed in the warm process")
    warm_check: CheckStatus | None = doc("the cache-loaded executable's output, checked like the first seed")
    warm_check_reason: str | None = doc("why that check failed; None when it passed")


class ProcessFields(_Group):
    """Facts of the processes around the case (harness/supervise/case_process.py, the executors)."""

    worker: Annotated[str | None, InTable(128)] = doc("the slot that ran it: 'cpu#0', 'cuda:1#0', "
                                                      "'ray:10.0.0.5/gpu3'")
    wall_s: float | None = doc("wall seconds of the whole case, every worker included")
    phases_s: dict[str, float] | None = doc("where wall_s went, seconds by phase (run/worker/phases.py; the warm "
                                            "worker's prefixed warm_)")
    worker_start: Literal["prestarted", "fresh"] | None = doc("the cold worker was a pre-started spare or "
                                                              "started for the case (run/prestart.py)")
    worker_start_reason: str | None = doc("why the cold worker started fresh")
    worker_start_warm: Literal["prestarted", "fresh"] | None = doc("the same for the warm worker")
    worker_start_warm_reason: str | None = doc("why the warm worker started fresh")
    warmup_overlap_compile_s: float | None = doc("seconds spares were getting ready while the cold worker compiled")
    warmup_overlap_compile_warm_s: float | None = doc("the same while the warm worker compiled")
    stderr_tail: str | None = doc("last 3000 characters of the cold worker's output")
    stderr_tail_warm: str | None = doc("last 3000 characters of the warm worker's output")
    gate_wait_cold_s: float | None = doc("seconds the cold worker waited for the gate")
    gate_wait_warm_s: float | None = doc("seconds the warm worker waited for the gate")
    warm_error: str | None = doc("why the warm compile gave no figures")
    rerun_alone_reason: str | None = doc("why this record is of a second run with the device to itself: the "
                                         "first ran out of memory beside other workers (executors/local.py)")
    artifacts_dir: str | None = doc("absolute folder of the case's artifacts")
    artifacts_error: str | None = doc("why artifacts shipped from a node were dropped")
    node_hardware_id: str | None = doc("hardware id of the Ray node that ran it")
    node_fingerprint: str | None = doc("environment fingerprint of that Ray node")


class RunFields(_Group):
    """Added by the orchestrator as it commits the record."""

    attempt: Annotated[int | None, COLUMN] = doc("1 for the run's first session, k for its (k-1)-th resume")
    pct_of_ceiling: Annotated[float | None, COLUMN] = doc("achieved GB/s or TFLOP/s as a percentage of the "
                                                          "ceiling, at most 100")
    pct_of_ceiling_measured: float | None = doc("the same of the measured ceiling (above 100: it was beaten)")
    ceiling_exceeded: bool | None = doc("the case beat the measured ceiling (the ceiling is raised to it)")
    pct_of_spec_peak: float | None = doc("achieved rate as a percentage of the datasheet's peak, where known")
    ceiling: Ceiling | None = doc("the ceiling pct_of_ceiling is measured against")


class LegacyFields(_Group):
    legacy_fields: dict[str, JsonValue] | None = doc("fields of a stored record this bakeoff does not know, kept")


# The groups in export order.
GROUPS: tuple[type[_Group], ...] = (CaseFields, Outcome, CompileFields, CheckFields, TimingFields, LoadFields,
                                    FigureQuality, DeviceState, SweepFields, WarmFields, ProcessFields, RunFields)


class ColdOutput(SweepFields, DeviceState, FigureQuality, LoadFields, TimingFields, CheckFields, CompileFields,
                 Outcome):
    """What the cold worker writes (harness/worker/cold.py)."""


class WarmOutput(WarmFields, Outcome):
    """What the warm worker writes: its figures, or an error (harness/worker/main.py run_warm)."""


class CaseRecord(LegacyFields, RunFields, ProcessFields, WarmFields, SweepFields, DeviceState, FigureQuality,
                 LoadFields, TimingFields, CheckFields, CompileFields, Outcome, CaseFields):
    """One case's record, as the orchestrator commits it (every group; `status` required)."""

    status: Annotated[Status, InTable(16)] = Field(description="ok, skipped, mismatch, compile_error, "
                                                   "runtime_error, timeout, oom or crash")

    @classmethod
    def from_columns(cls, columns: Mapping[str, Any]) -> CaseRecord:
        """A record from its flat columns (`err_rmse_vs_fp64`, `eager_headline_ms`, ...), as workers and the
        orchestrator write them; the same as `model_validate` (an unknown column fails, naming it)."""
        return cls.model_validate(dict(columns))

    def to_columns(self) -> dict[str, Any]:
        """The record's flat columns (nested parts flattened), legacy fields left out."""
        return self.model_dump(mode="python", exclude={"legacy_fields"})

    def flat(self) -> dict[str, Any]:
        """Every column in export order (None where not measured), then any legacy fields; as JSON values."""
        data = self.to_columns()
        out = {name: _plain(data[name]) for name in self.export_columns() if name in data}
        for key, value in (self.legacy_fields or {}).items():
            out.setdefault(key, value)
        return out

    @classmethod
    def export_columns(cls) -> list[str]:
        """The export's columns, in order: the groups' columns (then StoredRecord's store keys)."""
        return [name for group in GROUPS for name in group.column_names()]


def invalid_fields(exc: ValidationError, limit: int = 5) -> str:
    """A short message naming each field that failed and why, e.g.
    "phases_s: not a record field (declare it in bakeoff/results/record.py); compile_s: Input should be a
    valid number"."""
    parts = []
    for err in exc.errors()[:limit]:
        where = column_of(CaseRecord, err["loc"]) or "record"
        if err["type"] == "extra_forbidden":
            parts.append(f"{where}: not a record field (declare it in bakeoff/results/record.py)")
        else:
            parts.append(f"{where}: {err['msg']} (got {type(err.get('input')).__name__})")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _plain(value: Any) -> Any:
    """A value for an export row: datetimes as ISO text, tuples as lists, NaN and infinities as None."""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
