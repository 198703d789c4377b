"""Which per-call SM clocks of a record are evidence about each call, and so may turn its spans into cycles.

A record's `device_span_sm_clock_mhz` holds one clock per profiled call, with its source in
`device_span_sm_clock_source` (eager's: the `eager_` twins): "pm-sampler", the GPU's performance monitors over
the call's own span (harness/measure/pm_sampler.py); "marker-spin", read on the device from the spins around each
call (harness/measure/marker_clock.py: right in direction, not in size, for a power-capped call); or "nvml",
NVML's sampled clock over the call's host window. On the H200 NVML's reading changes in steps about every ten
calls and does not follow the calls (spans within 0.3% while it read 1800 to 1965 MHz), so only the two device
readings are used per call; a record with NVML's, or written before the source was kept, is read in time, or
with the median clock over its samples where a view needs cycles.
"""
from __future__ import annotations

import statistics
from typing import Any

PM_SOURCE = "pm-sampler"
MARKER_SOURCE = "marker-spin"
NVML_SOURCE = "nvml"
DEVICE_SOURCES = (PM_SOURCE, MARKER_SOURCE)  # read on the device, per call


def per_call_clocks(rec: dict[str, Any], prefix: str = "") -> list[float] | None:
    """The per-call clocks (MHz) of `{prefix}device_span_samples_ms` where they were read on the device for every
    call of a CUPTI-span headline; else None."""
    source = rec.get(f"{prefix}device_span_sm_clock_source")
    if source not in DEVICE_SOURCES or rec.get("headline_method") != "cupti-span":
        return None
    spans, clocks = rec.get(f"{prefix}device_span_samples_ms") or [], rec.get(f"{prefix}device_span_sm_clock_mhz") or []
    if not spans or len(clocks) != len(spans) or not all(c and float(c) > 0 for c in clocks):
        return None
    return [float(c) for c in clocks]


def span_kcycles(rec: dict[str, Any], prefix: str = "") -> float | None:
    """The median over the profiled calls of span x that call's clock (thousands of SM cycles), where
    `per_call_clocks` has the clocks; else None."""
    clocks = per_call_clocks(rec, prefix)
    if clocks is None:
        return None
    return float(statistics.median(float(x) * c for x, c in zip(rec[f"{prefix}device_span_samples_ms"], clocks)))
