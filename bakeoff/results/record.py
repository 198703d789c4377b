"""The record of one case: one typed model (`CaseRecord`), owned here, each phase filling its own part.

A record is flat (its JSON and database names are the field names below), but its fields come in groups,
one per phase that fills them:

    CaseFields       the orchestrator, from the planned case (what was asked for)
    Outcome          any phase: the status and why
    CompileFields    the cold worker: compile time, stages, cache, artifacts summary
    CheckFields      the cold worker: numeric error against fp64 and eager, on every seed
    TimingFields     the cold worker: every latency figure of the backend and of eager interleaved with it
                     (timer, single call, pipelined, CUPTI device time, CUDA graph, the headline), kernels,
                     SM clock, throughput, the timing gate
    LoadFields       the cold worker: what else ran while it timed, and the measurement quality judged
    DeviceState      the cold worker: GPU clocks, power and throttling before and after
    WarmFields       the warm worker: compile time in a fresh process with the cold caches
    ProcessFields    the harness around the workers: slot, wall time and its phases, pre-started workers,
                     output tails, artifacts' place
    RunFields        the orchestrator, as it commits: attempt, ceiling

The cold worker's output is a `ColdOutput`, the warm worker's a `WarmOutput`; both are serialized through
the model, so a field the model does not know, or a value JSON cannot hold, is an error (a `crash` record
saying which field), never a silent string. The store's columns (results/schema.py) and the export's
columns (results/export.py) and the reports' flat cases (results/report/data.py) are derived from here.
To add a field: one line in its group, typed as precisely as the data allows, with its unit in its name
and a description (docs/ARCHITECTURE.md, "Adding a record field"); it is stored in `details` unless marked
`InTable` (a column also needs a schema migration, results/migrations.py).

None means "not measured" (the step did not run, or does not apply); NaN never reaches the store.
"""
from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    model_serializer,
)

Status = Literal["ok", "skipped", "mismatch", "compile_error", "runtime_error", "timeout", "oom", "crash"]


@dataclass(frozen=True)
class InTable:
    """Marks a field stored as its own column of `records` (others go to the `details` JSON column).
    `length` bounds a VARCHAR column (None: unbounded text, or the number/boolean/JSON type of the field)."""

    length: int | None = None


COLUMN = InTable()  # a column of unbounded text, or of the field's number/boolean/JSON type


def doc(description: str) -> Any:
    """An optional field (None: not measured) with its description."""
    return Field(None, description=description)


_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants", validate_assignment=True)

# A number JSON cannot spell, written as text where it is the finding (the worst element of an output).
NonFinite = Literal["nan", "inf", "-inf"]
CheckStatus = Literal["ok", "mismatch"]


class _Group(BaseModel):
    model_config = _CONFIG


class _Part(BaseModel):
    """A nested value of a record field (a kernel, a GPU process, the ceiling): keys it lacks are left out
    when dumped, not written as null."""

    model_config = _CONFIG

    @model_serializer(mode="wrap")
    def _without_none(self, handler: Any) -> Any:
        return {k: v for k, v in handler(self).items() if v is not None}


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

    compile_s: Annotated[float | None, COLUMN] = doc("headline compile seconds: the compiler's own stages where "
                                                     "the backend names them, else compile + prepare + first run + "
                                                     "sync")
    compile_total_s: float | None = doc("seconds from the graph to the first result (compile, load or session, "
                                        "first run, sync)")
    compile_stages_s: dict[str, float] | None = doc("seconds per stage, as the backend reports them")
    compile_notes: list[str] | None = doc("the backend's notes on its compile")
    cache_hit_cold: bool | None = doc("the backend's own cache-hit report, cold")
    cache_files_cold: int | None = doc("files the cold compile wrote to its cache folders")
    cache_files_before_cold: int | None = doc("files in the cache folders before the cold worker compiled "
                                              "anything (0: its own, empty folders)")
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
    # the worst element of the worst output (harness/measure/worst_element.py)
    worst_elem_index: list[int] | None = doc("its index in the output, row-major")
    worst_elem_value: float | NonFinite | None = doc("the backend's value there")
    worst_elem_ref: float | NonFinite | None = doc("the float64 reference's value there")
    worst_elem_eager: float | NonFinite | None = doc("eager's value there")
    worst_elem_tol_ratio: float | NonFinite | None = doc("|value - ref| / (atol + rtol |ref|); inf where "
                                                         "finiteness differs")
    worst_elem_output: int | None = doc("which output (0-based)")
    worst_elem_seed: int | None = doc("which seed's inputs")
    # backend vs the fp64 reference (ErrorStats, harness/measure/numerics.py)
    err_max_abs_vs_fp64: Annotated[float | None, COLUMN] = doc("largest |error|")
    err_max_rel_vs_fp64: Annotated[float | None, COLUMN] = doc("largest |error| / |reference|")
    err_rel_l2_vs_fp64: Annotated[float | None, COLUMN] = doc("||error||_2 / ||reference||_2")
    err_rmse_vs_fp64: Annotated[float | None, COLUMN] = doc("root mean square error")
    err_cosine_vs_fp64: Annotated[float | None, COLUMN] = doc("cosine similarity")
    err_ulp_max_vs_fp64: Annotated[float | None, COLUMN] = doc("largest ULP distance (output dtype)")
    err_ulp_p99_vs_fp64: Annotated[float | None, COLUMN] = doc("99th percentile ULP distance")
    err_nonfinite_vs_fp64: int | None = doc("non-finite where the reference is not")
    err_within_tol_vs_fp64: bool | None = doc("within assert_close's default tolerances")
    err_nonfinite_mismatch_vs_fp64: int | None = doc("elements where the reference is +-inf or NaN and the "
                                                          "output is not the same")
    err_max_scaled_vs_fp64: float | None = doc("largest |error| / (|reference| + RMS(reference))")
    err_worst_index_vs_fp64: int | None = doc("flat index of the element to look at (-1: empty output)")
    err_worst_out_vs_fp64: float | None = doc("the output's value there")
    err_worst_ref_vs_fp64: float | None = doc("the reference's value there")
    # backend vs eager (ErrorStats, harness/measure/numerics.py)
    err_max_abs_vs_eager: Annotated[float | None, COLUMN] = doc("largest |error|")
    err_max_rel_vs_eager: float | None = doc("largest |error| / |reference|")
    err_rel_l2_vs_eager: Annotated[float | None, COLUMN] = doc("||error||_2 / ||reference||_2")
    err_rmse_vs_eager: float | None = doc("root mean square error")
    err_cosine_vs_eager: float | None = doc("cosine similarity")
    err_ulp_max_vs_eager: float | None = doc("largest ULP distance (output dtype)")
    err_ulp_p99_vs_eager: float | None = doc("99th percentile ULP distance")
    err_nonfinite_vs_eager: int | None = doc("non-finite where the reference is not")
    err_within_tol_vs_eager: bool | None = doc("within assert_close's default tolerances")
    err_nonfinite_mismatch_vs_eager: int | None = doc("elements where the reference is +-inf or NaN and the "
                                                          "output is not the same")
    err_max_scaled_vs_eager: float | None = doc("largest |error| / (|reference| + RMS(reference))")
    err_worst_index_vs_eager: int | None = doc("flat index of the element to look at (-1: empty output)")
    err_worst_out_vs_eager: float | None = doc("the output's value there")
    err_worst_ref_vs_eager: float | None = doc("the reference's value there")
    # eager vs the fp64 reference (ErrorStats, harness/measure/numerics.py)
    eager_err_max_abs_vs_fp64: float | None = doc("largest |error|")
    eager_err_max_rel_vs_fp64: float | None = doc("largest |error| / |reference|")
    eager_err_rel_l2_vs_fp64: Annotated[float | None, COLUMN] = doc("||error||_2 / ||reference||_2")
    eager_err_rmse_vs_fp64: Annotated[float | None, COLUMN] = doc("root mean square error")
    eager_err_cosine_vs_fp64: float | None = doc("cosine similarity")
    eager_err_ulp_max_vs_fp64: float | None = doc("largest ULP distance (output dtype)")
    eager_err_ulp_p99_vs_fp64: float | None = doc("99th percentile ULP distance")
    eager_err_nonfinite_vs_fp64: int | None = doc("non-finite where the reference is not")
    eager_err_within_tol_vs_fp64: bool | None = doc("within assert_close's default tolerances")
    eager_err_nonfinite_mismatch_vs_fp64: int | None = doc("elements where the reference is +-inf or NaN and the "
                                                          "output is not the same")
    eager_err_max_scaled_vs_fp64: float | None = doc("largest |error| / (|reference| + RMS(reference))")
    eager_err_worst_index_vs_fp64: int | None = doc("flat index of the element to look at (-1: empty output)")
    eager_err_worst_out_vs_fp64: float | None = doc("the output's value there")
    eager_err_worst_ref_vs_fp64: float | None = doc("the reference's value there")


class KernelTime(_Part):
    """One kernel name CUPTI saw in the profiled calls (harness/measure/kernel_times.py)."""

    name: str = Field(description="the kernel's name (cut at 1000 characters, ending in '…')")
    launches: float = Field(description="launches per call")
    device_ms: float = Field(description="device milliseconds per call, all its launches")
    share: float | None = Field(None, description="its share of the calls' summed kernel time (None when 0)")


class TimingFields(_Group):
    """Every latency figure of the backend and of eager interleaved with it (harness/measure/figures.py), the
    headline that means the same for every backend, kernels, SM clock, throughput, and the timing gate."""

    # the timer (harness/measure/timing.py measure): CUDA events or host clock + sync, cache flushed per sample
    latency_ms_median: Annotated[float | None, COLUMN] = doc("the timer's median milliseconds per call")
    latency_ms_p20: Annotated[float | None, COLUMN] = doc("the timer's 20th percentile ms per call")
    latency_ms_p80: Annotated[float | None, COLUMN] = doc("the timer's 80th percentile ms per call")
    latency_iqr_rel: Annotated[float | None, COLUMN] = doc("the timer's interquartile range over its median")
    n_samples: Annotated[int | None, COLUMN] = doc("timed samples")
    timing_method: str | None = doc("how the timer timed the backend, e.g. 'host-clock+sync' "
                                    "(harness/measure/timing.py)")
    samples: Annotated[list[float] | None, COLUMN] = doc("every timer sample in time order, ms per call")
    eager_latency_ms_median: Annotated[float | None, COLUMN] = doc("eager's timer median ms per call, "
                                                                   "interleaved")
    eager_latency_ms_p20: float | None = doc("eager's timer 20th percentile ms per call")
    eager_latency_ms_p80: float | None = doc("eager's timer 80th percentile ms per call")
    eager_samples: list[float] | None = doc("eager's timer samples in time order, ms per call")
    eager_timing_method: str | None = doc("how eager was timed (the backend's method)")
    speedup_vs_eager: Annotated[float | None, COLUMN] = doc("eager's headline_ms over the backend's (both by "
                                                            "the headline method, below)")
    timer_speedup_vs_eager: float | None = doc("eager's timer median over the backend's")
    sustained_s: float | None = doc("seconds of continuous load run before timing and profiling, together "
                                    "(timing.sustained_s: auto = 0.3 s before the timer and a 0.05 s top-up "
                                    "before the CUPTI pass on a GPU, none on the CPU)")
    # one synchronized call, host clock, dispatch included
    host_latency_ms: float | None = doc("median ms of one call synchronized before and after")
    host_latency_p20_ms: float | None = doc("its 20th percentile, ms")
    host_latency_p80_ms: float | None = doc("its 80th percentile, ms")
    eager_host_latency_ms: float | None = doc("eager's median ms of one synchronized call")
    eager_host_latency_p20_ms: float | None = doc("its 20th percentile, ms")
    eager_host_latency_p80_ms: float | None = doc("its 80th percentile, ms")
    # pipelined: many calls enqueued, one synchronize, per call
    pipelined_ms: float | None = doc("median ms per call of a pipelined batch")
    pipelined_p20_ms: float | None = doc("its 20th percentile, ms")
    pipelined_p80_ms: float | None = doc("its 80th percentile, ms")
    pipelined_calls: int | None = doc("calls per pipelined batch")
    eager_pipelined_ms: float | None = doc("eager's median ms per call, pipelined")
    eager_pipelined_p20_ms: float | None = doc("its 20th percentile, ms")
    eager_pipelined_p80_ms: float | None = doc("its 80th percentile, ms")
    eager_pipelined_calls: int | None = doc("eager's calls per pipelined batch")
    # CUDA graph replay
    graph_latency_ms: Annotated[float | None, COLUMN] = doc("median ms per call replayed from a CUDA graph")
    graph_latency_method: str | None = doc("how graph_latency_ms was taken: calls per captured graph")
    graph_replays: int | None = doc("replays behind graph_latency_ms")
    graph_latency_error: str | None = doc("why CUDA graph capture failed")
    # CUPTI device time (harness/measure/device_time.py), GPU only
    device_span_ms: float | None = doc("median ms from one call's first kernel start to its last kernel end")
    device_span_p20_ms: float | None = doc("its 20th percentile, ms")
    device_span_p80_ms: float | None = doc("its 80th percentile, ms")
    device_span_iqr_rel: float | None = doc("its interquartile range over its median")
    device_span_samples: list[float] | None = doc("the span of each profiled call, ms")
    kernel_count: Annotated[int | None, COLUMN] = doc("device kernels per call, median (CUPTI)")
    device_ms: Annotated[float | None, COLUMN] = doc("median summed kernel ms per call (CUPTI)")
    device_ms_p20: float | None = doc("20th percentile summed kernel ms per call")
    device_ms_p80: float | None = doc("80th percentile summed kernel ms per call")
    profiled_calls: int | None = doc("calls profiled")
    kernel_times: list[KernelTime] | None = doc("every kernel name seen, longest first")
    eager_device_span_ms: float | None = doc("eager's median device span ms per call")
    eager_device_span_p20_ms: float | None = doc("its 20th percentile, ms")
    eager_device_span_p80_ms: float | None = doc("its 80th percentile, ms")
    eager_device_span_iqr_rel: float | None = doc("its interquartile range over its median")
    eager_device_span_samples: list[float] | None = doc("eager's span of each profiled call, ms")
    eager_device_ms: float | None = doc("eager's median summed kernel ms per call")
    eager_device_ms_p20: float | None = doc("its 20th percentile, ms")
    eager_device_ms_p80: float | None = doc("its 80th percentile, ms")
    eager_kernel_count: int | None = doc("eager's device kernels per call, median")
    eager_profiled_calls: int | None = doc("eager's calls profiled")
    eager_kernel_times: list[KernelTime] | None = doc("every kernel name seen in eager's calls, longest first")
    launch_overhead_share: Annotated[float | None, COLUMN] = doc("1 - device_ms over the single synchronized "
                                                                 "call's latency")
    profile_error: str | None = doc("why the profiler gave no device figures")
    # the headline: CUPTI span on a GPU (else pipelined, with the reason), the timer on the CPU
    headline_ms: float | None = doc("median ms per call by the headline method, the same for every backend")
    headline_p20_ms: float | None = doc("its 20th percentile, ms")
    headline_p80_ms: float | None = doc("its 80th percentile, ms")
    headline_iqr_rel: float | None = doc("its interquartile range over its median")
    headline_n: int | None = doc("samples behind the headline")
    headline_method: str | None = doc("how the headline was measured, e.g. 'cupti-span'")
    headline_fallback: str | None = doc("why the headline is not the CUPTI span on a GPU")
    eager_headline_ms: float | None = doc("eager's median ms per call by the same method")
    eager_headline_p20_ms: float | None = doc("its 20th percentile, ms")
    eager_headline_p80_ms: float | None = doc("its 80th percentile, ms")
    # the SM clock while timing (harness/measure/clocks.py), GPU only
    sm_clock_mhz: float | None = doc("median SM clock during timing and profiling, MHz")
    sm_clock_mhz_min: int | None = doc("lowest SM clock sampled, MHz")
    sm_clock_mhz_max: int | None = doc("highest SM clock sampled, MHz")
    sm_clock_samples: int | None = doc("SM clock samples taken")
    sm_clock_error: str | None = doc("why the SM clock was not (fully) sampled")
    # the timing gate (harness/run/gate.py)
    gate: str | None = doc("the device's timing gate")
    gate_policy: Literal["exclusive", "timers_only", "beside_compiles"] | None = doc(
        "exclusive: nothing else on the device while a case times; timers_only: only timing phases serialized; "
        "beside_compiles: no other device work while it times, other cases' host-side compiles go on")
    gate_policy_reason: str | None = doc("why the case ran under that policy (run/gate_policy.py; `auto` resolved)")
    gate_wait_s: float | None = doc("seconds waited for the timing gate before timing")
    timing_windows: list[tuple[float, float]] | None = doc("(start, end) epoch seconds the timing gate was held "
                                                           "alone")
    compile_windows: list[tuple[float, float]] | None = doc("(start, end) epoch seconds of the cold and warm "
                                                            "processes' compiles (compile_setup, compile), gate "
                                                            "waits inside them not counted")
    achieved_gbps: Annotated[float | None, COLUMN] = doc("bytes_moved per headline call, GB/s")
    achieved_tflops: Annotated[float | None, COLUMN] = doc("flops per headline call, TFLOP/s")
    break_even_calls: Annotated[float | None, COLUMN] = doc("compile_total_s over the headline time saved per "
                                                            "call vs eager")


class GpuProcess(_Part):
    """Another process NVML saw on the GPU during timing (harness/measure/load_watch.py)."""

    pid: int = Field(description="its process id as NVML reports it")
    sm_util: int | None = Field(None, description="SM utilization in its samples, percent")
    mem_util: int | None = Field(None, description="memory utilization in its samples, percent")
    activity: Literal["unknown"] | None = Field(None, description="'unknown': a compute context, activity not "
                                                "reported")
    pid_namespace_unknown: bool | None = Field(None, description="NVML reported another pid namespace's ids")


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
    measurement_quality: Literal["clean", "noisy"] | None = doc("noisy when any noise rule fired")
    noise_reasons: list[str] | None = doc("each noise rule that fired, with who and by how much")
    latency_drift_rel: float | None = doc("spread of the backend's third-medians over the smallest (None: "
                                          "under 15 samples)")
    eager_drift_rel: float | None = doc("the same for the interleaved eager")
    eager_iqr_rel: float | None = doc("the interleaved eager's interquartile range over its median")


class GpuState(_Part):
    """The GPU as NVML saw it at one moment (harness/measure/environment.py gpu_state)."""

    sm_clock_mhz: int | None = Field(None, description="SM clock, MHz")
    mem_clock_mhz: int | None = Field(None, description="memory clock, MHz")
    temperature_c: float | None = Field(None, description="GPU temperature, degrees Celsius")
    power_w: float | None = Field(None, description="board power draw, W")
    throttle_reasons: list[str] | None = Field(None, description="NVML clock event reasons ('None': none)")
    error: str | None = Field(None, description="why NVML gave no state")


class DeviceState(_Group):
    """GPU state sampled by the cold worker (harness/measure/environment.py gpu_state); None on the CPU."""

    gpu_state_before: GpuState | None = doc("clocks, temperature, power and throttle reasons before the case")
    gpu_state_after: GpuState | None = doc("the same, after timing")


class SweepFields(_Group):
    """A shape sweep's serving (harness/run/worker/sweep.py; docs/MEASUREMENT.md "Shape sweeps")."""

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
    compile_process_setup_warm_s: float | None = doc("seconds of the warm process's one-time start (the tiny "
                                                     "graph)")
    cache_files_setup_warm: int | None = doc("files the tiny graph wrote to the cache folders, warm")
    compile_process_setup_warm_error: str | None = doc("why the tiny graph failed in the warm process")
    warm_check: CheckStatus | None = doc("the cache-loaded executable's output, checked like the first seed")
    warm_check_reason: str | None = doc("why that check failed; None when it passed")


class ProcessFields(_Group):
    """Facts of the processes around the case (harness/run/case_process.py, the executors)."""

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
    warmup_overlap_compile_s: float | None = doc("seconds spares were getting ready while the cold worker "
                                                 "compiled")
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


class Ceiling(_Part):
    """The measured ceiling a case is a share of (harness/measure/ceiling_share.py)."""

    name: str = Field(description="copy_gbps or matmul_tflops_<dtype> (bakeoff calibrate)")
    value: float = Field(description="the ceiling as measured, GB/s or TFLOP/s")
    raised_to: float | None = Field(None, description="the case's own rate, where it beat the measured value")


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
    legacy_fields: dict[str, JsonValue] | None = doc("fields of a stored record this bakeoff does not know (an "
                                                     "older or newer writer), kept as read")


# The groups in export order.
GROUPS: tuple[type[_Group], ...] = (CaseFields, Outcome, CompileFields, CheckFields, TimingFields, LoadFields,
                                    DeviceState, SweepFields, WarmFields, ProcessFields, RunFields)


class ColdOutput(SweepFields, DeviceState, LoadFields, TimingFields, CheckFields, CompileFields, Outcome):
    """What the cold worker writes (harness/run/worker/cold.py)."""


class WarmOutput(WarmFields, Outcome):
    """What the warm worker writes: its figures, or an error (harness/run/worker/main.py run_warm)."""


class CaseRecord(LegacyFields, RunFields, ProcessFields, WarmFields, SweepFields, DeviceState, LoadFields,
                 TimingFields, CheckFields, CompileFields, Outcome, CaseFields):
    """One case's record, as the orchestrator commits it (every group; `status` required)."""

    status: Annotated[Status, InTable(16)] = Field(description="ok, skipped, mismatch, compile_error, "
                                                   "runtime_error, timeout, oom or crash")

    def flat(self) -> dict[str, Any]:
        """Every field in export order (None where not measured), then any legacy fields; as JSON values."""
        data = self.model_dump(mode="python", exclude={"legacy_fields"})
        out = {name: _plain(data[name]) for name in self.export_columns() if name in data}
        for key, value in (self.legacy_fields or {}).items():
            out.setdefault(key, value)
        return out

    @classmethod
    def export_columns(cls) -> list[str]:
        """The export's columns, in order: the groups' fields (then StoredRecord's store keys)."""
        return [name for group in GROUPS for name in group.model_fields]


class StoredRecord(CaseRecord):
    """A record read back from the store, with the keys the store adds. Its status is any text: a newer
    bakeoff's status reads as written."""

    status: Annotated[str, InTable(16)] = Field(description="as written (see CaseRecord.status)")
    run_id: str | None = doc("the run it belongs to")
    id: int | None = doc("the store's row id (insertion order)")
    created_at: dt.datetime | None = doc("when the record was committed (UTC)")

    @classmethod
    def export_columns(cls) -> list[str]:
        return ["run_id", "id", "created_at", *super().export_columns()]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StoredRecord:
        """A record from a row of `records` (columns, and `details` holding the rest). Never raises for
        what an older or newer bakeoff wrote: an unknown field, or a value of another type, is kept in
        `legacy_fields` instead of failing the read."""
        data = {k: v for k, v in row.items() if k != "details" and v is not None}
        for key, value in (row.get("details") or {}).items():
            if value is not None:
                data.setdefault(key, value)
        known = cls.model_fields
        legacy = {k: data.pop(k) for k in list(data) if k not in known or k == "legacy_fields"}
        data.setdefault("status", "crash")  # no stored record lacks one; a corrupt row still reads
        for _ in range(len(data) + 1):
            try:
                return cls(**data, legacy_fields=_jsonable(legacy) or None)
            except ValidationError as exc:
                bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
                bad.discard("legacy_fields")
                if not bad & set(data):
                    raise
                for name in bad & set(data):
                    legacy[name] = data.pop(name)
                data.setdefault("status", "crash")
        raise AssertionError("unreachable")


def record_columns() -> list[tuple[str, type, InTable]]:
    """(name, Python annotation, InTable) of every field stored as a column, in export order."""
    out = []
    for name in CaseRecord.export_columns():
        info = CaseRecord.model_fields[name]
        marks = [m for m in info.metadata if isinstance(m, InTable)]
        if marks:
            out.append((name, info.annotation, marks[0]))
    return out


def invalid_fields(exc: ValidationError, limit: int = 5) -> str:
    """A short message naming each field that failed and why, e.g.
    "phases_s: not a record field (declare it in bakeoff/results/record.py); compile_s: Input should be a
    valid number"."""
    parts = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "record"
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


def _jsonable(value: Any) -> Any:
    """`value` with anything JSON cannot hold (a datetime from a column) turned into text, for legacy_fields."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
