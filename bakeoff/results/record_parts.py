"""The parts a record (results/record.py) is made of, and how they turn into the record's columns.

A record's groups (`_Group`) hold plain fields and nested parts: the same error statistics measured three
ways (`ErrorStats`: vs fp64, vs eager, eager vs fp64), a latency figure of the backend and its mirror for the
eager run interleaved with it (`Timer`, `Spread`, `Pipelined`, `DeviceTime`, `Headline`), the worst element.
Each nested part is flattened to one column per field, named by its `Flat` mark (the column names the store,
the exports and the reports have always had). The flattening is the model's own: a group validates from the
flat columns (or from the nested parts) and dumps to the flat columns, so the store, the exports and the
worker's output file see columns only, while code holding a record reads `record.vs_fp64.rmse`.

Values inside a field (a kernel, a GPU process, the ceiling) are `_Part`s: kept nested in their column.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, get_args

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

Status = Literal["ok", "skipped", "mismatch", "compile_error", "runtime_error", "timeout", "oom", "crash"]
# A number JSON cannot spell, written as text where it is the finding (the worst element of an output).
NonFinite = Literal["nan", "inf", "-inf"]
CheckStatus = Literal["ok", "mismatch"]
ClockSource = Literal["pm-sampler", "marker-spin", "nvml"]  # how a per-call SM clock was read (call_clocks.py)

_CONFIG = ConfigDict(extra="forbid", ser_json_inf_nan="constants", validate_assignment=True)


@dataclass(frozen=True)
class InTable:
    """Marks a field stored as its own column of `records` (others go to the `details` JSON column).
    `length` bounds a VARCHAR column (None: unbounded text, or the number/boolean/JSON type of the field)."""

    length: int | None = None


COLUMN = InTable()  # a column of unbounded text, or of the field's number/boolean/JSON type


def doc(description: str) -> Any:
    """An optional field (None: not measured) with its description."""
    return Field(None, description=description)


@dataclass(frozen=True)
class Flat:
    """Marks a group's field that holds a nested part: it is one column per part field, `columns` naming
    each (part field, column name), in column order; `in_table`: the part fields whose columns are columns
    of `records` (the others go to `details`)."""

    columns: tuple[tuple[str, str], ...]
    in_table: frozenset[str] = frozenset()

    @classmethod
    def of(cls, columns: Mapping[str, str], in_table: Iterable[str] = ()) -> Flat:
        return cls(tuple(columns.items()), frozenset(in_table))

    def mirror(self, prefix: str, order: Iterable[str], in_table: Iterable[str] = ()) -> Flat:
        """The same part's columns named with `prefix` (eager's mirror of a backend figure), in `order`."""
        names = dict(self.columns)
        return Flat(tuple((f, prefix + names[f]) for f in order), frozenset(in_table))


def spread_columns(stem: str) -> dict[str, str]:
    """A Spread's columns: '<stem>_ms', '<stem>_p20_ms', '<stem>_p80_ms'."""
    return {"median_ms": f"{stem}_ms", "p20_ms": f"{stem}_p20_ms", "p80_ms": f"{stem}_p80_ms"}


def error_columns(template: str, in_table: Iterable[str]) -> Flat:
    """An ErrorStats' columns: `template` with each statistic's name, e.g. 'err_{}_vs_fp64'."""
    return Flat.of({f: template.format(f) for f in ErrorStats.model_fields}, in_table)


class Column(NamedTuple):
    name: str
    annotation: Any
    description: str | None
    in_table: InTable | None


class _Part(BaseModel):
    """A nested value of a record field (a kernel, a GPU process, the ceiling): keys it lacks are left out
    when dumped, not written as null."""

    model_config = _CONFIG

    @model_serializer(mode="wrap")
    def _without_none(self, handler: Any) -> Any:
        return {k: v for k, v in handler(self).items() if v is not None}


class _Figures(BaseModel):
    """A nested part of a record group, flattened to columns (`Flat`); None where not measured."""

    model_config = _CONFIG


class _Group(BaseModel):
    """A group of record fields: validated from flat columns (or nested parts), dumped as flat columns."""

    model_config = _CONFIG

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        nested = nested_fields(cls)
        if not nested or not isinstance(data, dict):
            return data
        data = dict(data)
        for field, flat in nested.items():
            part = {f: data.pop(col) for f, col in flat.columns if col in data}
            if part:
                given = data.get(field)
                if isinstance(given, BaseModel):
                    given = given.model_dump(exclude_unset=True)
                data[field] = {**given, **part} if isinstance(given, dict) else part
        return data

    @model_serializer(mode="wrap")
    def _flatten(self, handler: Any) -> Any:
        data = handler(self)
        nested = nested_fields(type(self))
        if not nested or not isinstance(data, dict):
            return data
        out: dict[str, Any] = {}
        for key, value in data.items():
            flat = nested.get(key)
            if flat is None:
                out[key] = value
            elif value is None:  # the part not measured: each of its columns None
                out.update((col, None) for _, col in flat.columns)
            else:
                out.update((col, value[f]) for f, col in flat.columns if f in value)
        return out

    @classmethod
    def declared_columns(cls) -> list[Column]:
        """Every column of this group in order: a nested part's columns in place of its field."""
        return list(_columns(cls))

    @classmethod
    def column_names(cls) -> list[str]:
        return [c.name for c in _columns(cls)]


@functools.cache
def nested_fields(cls: type[BaseModel]) -> dict[str, Flat]:
    """The fields of `cls` that hold a nested part, with their Flat marks."""
    return {name: marks[0] for name, info in cls.model_fields.items()
            if (marks := [m for m in info.metadata if isinstance(m, Flat)])}


def part_class(annotation: Any) -> type[BaseModel]:
    """The part model of a nested field's annotation (`ErrorStats | None` -> ErrorStats)."""
    return next(a for a in (annotation, *get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel))


@functools.cache
def _columns(cls: type[BaseModel]) -> tuple[Column, ...]:
    out = []
    nested = nested_fields(cls)
    for name, info in cls.model_fields.items():
        flat = nested.get(name)
        if flat is None:
            marks = [m for m in info.metadata if isinstance(m, InTable)]
            out.append(Column(name, info.annotation, info.description, marks[0] if marks else None))
            continue
        part = part_class(info.annotation).model_fields
        for f, col in flat.columns:
            out.append(Column(col, part[f].annotation, f"{info.description}: {part[f].description}",
                              COLUMN if f in flat.in_table else None))
    return tuple(out)


def column_of(cls: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """The column an error's location is in, with the rest of the path: ('vs_fp64', 'rmse') ->
    'err_rmse_vs_fp64'; ('eager_device_time', 'kernel_times', 0, 'name') -> 'eager_kernel_times.0.name'."""
    path = [str(p) for p in loc]
    flat = nested_fields(cls).get(path[0]) if path else None
    names = dict(flat.columns) if flat else {}
    if len(path) > 1 and path[1] in names:
        path = [names[path[1]], *path[2:]]
    return ".".join(path)


# --- nested parts, flattened to columns ---------------------------------------------------------------------

class ErrorStats(_Figures):
    """One output's error against one reference (harness/measure/numerics.py ErrorStats, the worst seed)."""

    max_abs: float | None = doc("largest |error|")
    max_rel: float | None = doc("largest |error| / |reference|")
    rel_l2: float | None = doc("||error||_2 / ||reference||_2")
    rmse: float | None = doc("root mean square error")
    cosine: float | None = doc("cosine similarity")
    ulp_max: float | None = doc("largest ULP distance (output dtype)")
    ulp_p99: float | None = doc("99th percentile ULP distance")
    nonfinite: int | None = doc("non-finite where the reference is not")
    within_tol: bool | None = doc("within assert_close's default tolerances")
    nonfinite_mismatch: int | None = doc("elements where the reference is +-inf or NaN and the output is not the "
                                         "same")
    max_scaled: float | None = doc("largest |error| / (|reference| + RMS(reference))")
    worst_index: int | None = doc("flat index of the element to look at (-1: empty output)")
    worst_out: float | None = doc("the output's value there")
    worst_ref: float | None = doc("the reference's value there")


class WorstElement(_Figures):
    """The worst element of the worst output (harness/measure/worst_element.py)."""

    index: list[int] | None = doc("its index in the output, row-major")
    value: float | NonFinite | None = doc("the backend's value there")
    ref: float | NonFinite | None = doc("the float64 reference's value there")
    eager: float | NonFinite | None = doc("eager's value there")
    tol_ratio: float | NonFinite | None = doc("|value - ref| / (atol + rtol |ref|); inf where finiteness differs")
    output: int | None = doc("which output (0-based)")
    seed: int | None = doc("which seed's inputs")


class Spread(_Figures):
    """A latency's median and its 20th and 80th percentiles, ms per call."""

    median_ms: float | None = doc("median ms per call")
    p20_ms: float | None = doc("its 20th percentile, ms")
    p80_ms: float | None = doc("its 80th percentile, ms")


class Timer(Spread):
    """The timer (harness/measure/timing.py measure): CUDA events or host clock + sync, cache flushed per
    sample."""

    samples_ms: list[float] | None = doc("every timer sample in time order, ms per call")
    method: str | None = doc("how the timer timed it, e.g. 'host-clock+sync' (harness/measure/timing.py)")


class BackendTimer(Timer):
    iqr_rel: float | None = doc("the timer's interquartile range over its median")
    n: int | None = doc("timed samples")


class Pipelined(Spread):
    """Many calls enqueued, one synchronize: ms per call."""

    calls: int | None = doc("calls per pipelined batch")


class DeviceTime(_Figures):
    """CUPTI's device time of the profiled calls (harness/measure/device_time.py), GPU only."""

    span_ms: float | None = doc("median ms from one call's first kernel start to its last kernel end")
    span_p20_ms: float | None = doc("its 20th percentile, ms")
    span_p80_ms: float | None = doc("its 80th percentile, ms")
    span_iqr_rel: float | None = doc("its interquartile range over its median")
    span_samples_ms: list[float] | None = doc("the span of each profiled call, ms")
    span_sm_clock_mhz: list[float] | None = doc("the SM clock during each profiled call, MHz (span_sm_clock_source "
                                                "says how it was read)")
    span_sm_clock_source: ClockSource | None = doc(
        "where span_sm_clock_mhz was read: 'pm-sampler', the GPU's PM sampler over the call's own span (elapsed SM "
        "cycles over nanoseconds); 'marker-spin', on the device, the mean of the readings of the markers before and "
        "after the call (span_sm_clock_edges_mhz), where the sampler is unavailable or missed a call; 'nvml', "
        "NVML's readings inside the call's host window (their median, else the nearest), where neither read every "
        "call")
    span_sm_clock_edges_mhz: list[tuple[float | None, float | None]] | None = doc(
        "the SM clock read by the marker before and by the marker after each profiled call, MHz (the difference "
        "of its two spin kernels' CUPTI durations; None: that marker gave no reading)")
    span_sm_clock_error: str | None = doc("why the markers gave no clock for some profiled call")
    span_sm_clock_sampler_error: str | None = doc(
        "why the PM sampler gave no clock for some profiled call (cupti-python missing, the sampler did not start, "
        "no offset fitted, a call shorter than two samples); the clock is then the markers'")
    kernel_count: int | None = doc("device kernels per call, median")
    kernel_sum_ms: float | None = doc("median summed kernel ms per call")
    kernel_sum_p20_ms: float | None = doc("20th percentile summed kernel ms per call")
    kernel_sum_p80_ms: float | None = doc("80th percentile summed kernel ms per call")
    profiled_calls: int | None = doc("calls profiled")
    kernel_times: list[KernelTime] | None = doc("every kernel name seen, longest first")


class Headline(Spread):
    """The headline: CUPTI span on a GPU (else pipelined, with the reason), the timer on the CPU; the same
    method for every backend."""

    iqr_rel: float | None = doc("its interquartile range over its median")
    n: int | None = doc("samples behind the headline")
    method: str | None = doc("how the headline was measured, e.g. 'cupti-span'")
    fallback: str | None = doc("why the headline is not the CUPTI span on a GPU")


# Where each latency part's fields go: the backend's columns, and eager's mirror of them ("eager_" + the name).
TIMER_COLUMNS = Flat.of({"median_ms": "latency_ms_median", "p20_ms": "latency_ms_p20", "p80_ms": "latency_ms_p80",
                  "iqr_rel": "latency_iqr_rel", "n": "n_samples", "method": "timing_method",
                  "samples_ms": "samples_ms"}, in_table=("median_ms", "p20_ms", "p80_ms", "iqr_rel", "n", "samples_ms"))
HOST_COLUMNS = Flat.of(spread_columns("host_latency"))
PIPELINED_COLUMNS = Flat.of({**spread_columns("pipelined"), "calls": "pipelined_calls"})
DEVICE_TIME_COLUMNS = Flat.of({"span_ms": "device_span_ms", "span_p20_ms": "device_span_p20_ms",
                   "span_p80_ms": "device_span_p80_ms", "span_iqr_rel": "device_span_iqr_rel",
                   "span_samples_ms": "device_span_samples_ms", "span_sm_clock_mhz": "device_span_sm_clock_mhz",
                   "span_sm_clock_source": "device_span_sm_clock_source",
                   "span_sm_clock_edges_mhz": "device_span_sm_clock_edges_mhz",
                   "span_sm_clock_error": "device_span_sm_clock_error",
                   "span_sm_clock_sampler_error": "device_span_sm_clock_sampler_error",
                   "kernel_count": "kernel_count",
                   "kernel_sum_ms": "device_ms", "kernel_sum_p20_ms": "device_ms_p20",
                   "kernel_sum_p80_ms": "device_ms_p80", "profiled_calls": "profiled_calls",
                   "kernel_times": "kernel_times"}, in_table=("kernel_count", "kernel_sum_ms"))
# eager's mirror, in the column order stores have had (the newer columns after the clock's)
EAGER_DEVICE_TIME_COLUMNS = DEVICE_TIME_COLUMNS.mirror("eager_", (
    "span_ms", "span_p20_ms", "span_p80_ms", "span_iqr_rel", "span_samples_ms", "span_sm_clock_mhz",
    "span_sm_clock_source", "span_sm_clock_edges_mhz", "span_sm_clock_error", "kernel_sum_ms", "kernel_sum_p20_ms",
    "kernel_sum_p80_ms", "kernel_count", "profiled_calls", "kernel_times", "span_sm_clock_sampler_error"))
HEADLINE_COLUMNS = Flat.of({**spread_columns("headline"), "iqr_rel": "headline_iqr_rel", "n": "headline_n",
                     "method": "headline_method", "fallback": "headline_fallback"})



WORST_ELEMENT_COLUMNS = Flat.of({f: f"worst_elem_{f}" for f in WorstElement.model_fields})

# --- values inside a column ---------------------------------------------------------------------------------

class KernelTime(_Part):
    """One kernel name CUPTI saw in the profiled calls (harness/measure/kernel_times.py)."""

    name: str = Field(description="the kernel's name (cut at 1000 characters, ending in '…')")
    launches: float = Field(description="launches per call")
    device_ms: float = Field(description="device milliseconds per call, all its launches")
    share: float | None = Field(None, description="its share of the calls' summed kernel time (None when 0)")


class GpuProcess(_Part):
    """Another process NVML saw on the GPU during timing (harness/measure/load_watch.py)."""

    pid: int = Field(description="its process id as NVML reports it")
    sm_util_pct: int | None = Field(None, description="SM utilization in its samples, percent")
    mem_util_pct: int | None = Field(None, description="memory utilization in its samples, percent")
    activity: Literal["unknown"] | None = Field(None, description="'unknown': a compute context, activity not "
                                                "reported")
    pid_namespace_unknown: bool | None = Field(None, description="NVML reported another pid namespace's ids")
    gated_sibling: bool | None = Field(None, description="a bakeoff worker under this device's timing gate (its "
                                       "environment names the same gate): it cannot time or check while this "
                                       "case times; what it may run beside is the first run of a compile")


class GpuState(_Part):
    """The GPU as NVML saw it at one moment (harness/measure/environment.py gpu_state)."""

    sm_clock_mhz: int | None = Field(None, description="SM clock, MHz")
    mem_clock_mhz: int | None = Field(None, description="memory clock, MHz")
    temperature_c: float | None = Field(None, description="GPU temperature, degrees Celsius")
    power_w: float | None = Field(None, description="board power draw, W")
    throttle_reasons: list[str] | None = Field(None, description="NVML clock event reasons ('None': none)")
    error: str | None = Field(None, description="why NVML gave no state")


class Ceiling(_Part):
    """The measured ceiling a case is a share of (harness/measure/ceiling_share.py)."""

    name: str = Field(description="copy_gbps or matmul_tflops_<dtype> (bakeoff calibrate)")
    value: float = Field(description="the ceiling as measured, GB/s or TFLOP/s")
    raised_to: float | None = Field(None, description="the case's own rate, where it beat the measured value")


DeviceTime.model_rebuild()

__all__ = ["COLUMN", "DEVICE_TIME_COLUMNS", "EAGER_DEVICE_TIME_COLUMNS", "HEADLINE_COLUMNS", "HOST_COLUMNS",
           "PIPELINED_COLUMNS", "TIMER_COLUMNS", "WORST_ELEMENT_COLUMNS", "BackendTimer", "Ceiling", "CheckStatus",
           "ClockSource", "Column", "DeviceTime", "ErrorStats", "Flat", "GpuProcess", "GpuState", "Headline",
           "InTable", "KernelTime", "NonFinite", "Pipelined", "Spread", "Status", "Timer", "WorstElement",
           "column_of", "doc", "error_columns", "nested_fields", "part_class", "spread_columns"]


class FigureQuality(_Group):
    """The speedup's quality, judged on the paired ratios of the headline's interleaved samples, beside the
    absolute headline's (LoadFields' headline_quality), and the clock that can account for a latency's spread
    (harness/measure/noise.py)."""

    speedup_quality: Literal["clean", "noisy"] | None = doc("the speedup's own quality (None: no eager beside it)")
    speedup_noise_reasons: list[str] | None = doc("each rule that fired for the speedup")
    speedup_iqr_rel: float | None = doc("IQR/median of the paired ratios eager_i / backend_i of the headline")
    speedup_drift_rel: float | None = doc("spread of those ratios' third-medians over the smallest (None: <15)")
    headline_sm_clock_mhz_max: int | None = doc("highest SM clock over the headline's samples, MHz")
    headline_sm_clock_source: ClockSource | None = doc(
        "where the headline's clock figures were read: 'pm-sampler' or 'marker-spin', the per-call clocks of every "
        "profiled call (device_span_sm_clock_mhz and eager's; 'marker-spin' where any target's came from the "
        "markers); 'nvml', NVML's readings over the CUPTI pass")
