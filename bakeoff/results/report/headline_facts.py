"""What a record says about its headline beside the figure itself: whether the headline's own samples were noisy,
the SM clock they ran at, and the 95% interval of the speedup over eager. The terminal summary and `compare` read
them here, from flat records (stored columns with `details` merged in).

Older stores lack some of these fields: the headline's quality then falls back to the case's overall
`measurement_quality` (which also folds in host load and the host-clock figures), and the clock and the interval
are None, so nothing is shown and compare works in time space.
"""
from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any, Iterable

from bakeoff.results.call_clocks import span_kcycles
from bakeoff.results.report.data import fnum, headline_ms

# A headline's SM clock this far (relative) from the run's typical one is shown beside its absolute latency: on a
# power-capped GPU a compute-bound call's time follows the clock, and 3% is above the round-to-round wander of a
# steady clock (NVML reads it in 15 MHz steps, under 1% of an H200's ~1.8 GHz).
CLOCK_APART_REL = 0.03
# A host-timed single call this much longer than its kernels' CUPTI span (both at least, absolute and relative to
# the span) has time outside its kernels worth a user's eye: an allocation or host work in every call that the
# span, which times the kernels, does not see. Dispatch alone costs a few to a few hundred microseconds a call.
OUTSIDE_KERNELS_MIN_MS = 1.0
OUTSIDE_KERNELS_MIN_REL = 0.25
# NVML's clock event reasons that hold the SM clock down, in words; one set in at least CLOCK_LIMIT_SHARE of the
# timing window's clock samples (`sm_clock_events`) is named beside a shown clock. On the H200, NVML named the
# power cap ('SwPowerCap') after 16-bit GEMM cases whose calls ran at 1,250-1,720 MHz (1,980 at rest); GpuIdle
# and the application-clock settings say nothing about a call and are not named.
CLOCK_LIMITS = {"SwPowerCap": "power cap", "HwPowerBrakeSlowdown": "power brake", "SwThermalSlowdown": "thermal",
                "HwThermalSlowdown": "thermal", "HwSlowdown": "hardware slowdown"}
CLOCK_LIMIT_SHARE = 0.1
# Each speedup is over eager timed beside the backend in that backend's own case. Where eager's own headline differs
# between two cases by more than this (max / min - 1), eager's level moved between them and the ratio of their
# speedups carries the move: on an H100, eager's 16-bit RMSNorm spanned 0.107 ms in tritongen's case and 0.124 ms
# in Inductor's while the two backends spanned 0.090 and 0.092 ms, and their speedups read 1.20x and 1.36x.
EAGER_APART_REL = 0.05


def headline_quality(rec: dict[str, Any]) -> str | None:
    """'clean', 'clock' or 'noisy': the headline's own quality (`headline_quality`; 'clock' when its only spread
    was the SM clock's, steady in cycles: harness/measure/noise.py), else the case's overall `measurement_quality`
    (stores written before the headline was judged on its own); None when not timed."""
    quality = rec.get("headline_quality")
    return quality if quality is not None else rec.get("measurement_quality")


def speedup_quality(rec: dict[str, Any]) -> str | None:
    """'clean' or 'noisy': the speedup's own quality (`speedup_quality`, judged on the paired ratios of the
    headline's interleaved samples), else the headline's (eager's own case, older stores)."""
    quality = rec.get("speedup_quality")
    return quality if quality is not None else headline_quality(rec)


def judged_on_its_own(rec: dict[str, Any]) -> bool:
    """The record judges its headline on its own (`headline_quality` present), not by the case's summary."""
    return rec.get("headline_quality") is not None


def noise_word(rec: dict[str, Any]) -> str | None:
    """What a noise column says of a record: 'noisy' or 'clock' (the headline's own quality), 'others' where the
    headline is clean and only the case's other figures were noisy (host load, the timer's samples), 'clean';
    None when not timed."""
    quality = headline_quality(rec)
    if quality in (None, "noisy", "clock"):
        return quality
    return "others" if rec.get("measurement_quality") == "noisy" else "clean"


def noise_word_reasons(rec: dict[str, Any]) -> list[str]:
    """The reasons behind `noise_word`: the headline's for 'noisy' and 'clock' (the case's in records written
    before the headline was judged on its own), the case's for 'others'; none for 'clean'."""
    word = noise_word(rec)
    if word in ("noisy", "clock") and judged_on_its_own(rec):
        return list(rec.get("headline_noise_reasons") or [])
    return list(rec.get("noise_reasons") or []) if word in ("noisy", "others") else []


def headline_noise_note(rec: dict[str, Any]) -> str | None:
    """The reasons the headline is noisy as one line (headline_quality / headline_noise_reasons; the case's
    measurement_quality / noise_reasons for older records), None when it is not noisy."""
    if headline_quality(rec) != "noisy":
        return None
    reasons = rec.get("headline_noise_reasons") if judged_on_its_own(rec) else rec.get("noise_reasons")
    return "; ".join(reasons or []) or "noisy"


def speedup_noise_note(rec: dict[str, Any]) -> str | None:
    """The reasons the speedup is noisy as one line (speedup_quality / speedup_noise_reasons; the headline's
    note where the speedup was not judged on its own), None when it is not noisy."""
    if rec.get("speedup_quality") is None:
        return headline_noise_note(rec)
    if rec["speedup_quality"] != "noisy":
        return None
    return "; ".join(rec.get("speedup_noise_reasons") or []) or "noisy"


def headline_clock_mhz(rec: dict[str, Any]) -> float | None:
    """The median SM clock over the headline's samples (MHz); None on the CPU, without the CUPTI span, or in
    stores written before it was recorded."""
    mhz = fnum(rec.get("headline_sm_clock_mhz_median"))
    return mhz if mhz is not None and mhz > 0 else None


def headline_kcycles(rec: dict[str, Any]) -> float | None:
    """The headline in thousands of SM cycles (ms x MHz): the median over the profiled calls of each call's span
    times the clock read on the device around it, where the record has such clocks (results/call_clocks.py);
    else the headline times the median clock over its samples; None without a clock."""
    kcycles = span_kcycles(rec)
    if kcycles is not None:
        return kcycles
    ms, mhz = fnum(rec.get("headline_ms")), headline_clock_mhz(rec)
    return ms * mhz if ms is not None and mhz is not None else None


def outside_kernels_ms(rec: dict[str, Any]) -> float | None:
    """How much longer the single synchronized call (`host_latency_ms`, host clock) takes than its kernels' span
    (`device_span_ms`, CUPTI), where the headline is the span and the gap is at least OUTSIDE_KERNELS_MIN_MS and
    OUTSIDE_KERNELS_MIN_REL of the span; else None. The headline is right about the kernels and silent about
    such time: this is the figure that tells a user."""
    host, span = fnum(rec.get("host_latency_ms")), fnum(rec.get("device_span_ms"))
    if rec.get("headline_method") != "cupti-span" or host is None or not span or span <= 0:
        return None
    gap = host - span
    return gap if gap >= OUTSIDE_KERNELS_MIN_MS and gap >= OUTSIDE_KERNELS_MIN_REL * span else None


def typical_clock_mhz(records: Iterable[dict[str, Any]]) -> float | None:
    """The median of the run's headline clocks (one per case that has one); None when no case has one."""
    clocks = [c for c in map(headline_clock_mhz, records) if c is not None]
    return float(statistics.median(clocks)) if clocks else None


def clock_apart(rec: dict[str, Any], typical_mhz: float | None, limit: float = CLOCK_APART_REL) -> float | None:
    """The record's headline clock when it differs from `typical_mhz` by more than `limit` (relative), else
    None (also when either clock is unknown)."""
    mhz = headline_clock_mhz(rec)
    if mhz is None or not typical_mhz or abs(mhz / typical_mhz - 1) <= limit:
        return None
    return mhz


def shown_clock_mhz(rec: dict[str, Any], typical_mhz: float | None) -> float | None:
    """The headline's SM clock where a latency should carry it: where it stands apart from the run's typical one
    (`clock_apart`), and wherever the headline's spread was the clock's (quality 'clock': the latency is a figure
    at that clock); None elsewhere."""
    apart = clock_apart(rec, typical_mhz)
    if apart is not None:
        return apart
    return headline_clock_mhz(rec) if headline_quality(rec) == "clock" else None


def clock_limits(rec: dict[str, Any]) -> list[str]:
    """What held the SM clock down while the case timed, in words (CLOCK_LIMITS, each once, in that order): the
    reasons set in at least CLOCK_LIMIT_SHARE of the samples; [] where none was or the record has no reasons."""
    events = rec.get("sm_clock_events")
    if not isinstance(events, dict):
        return []
    held = {word for name, word in CLOCK_LIMITS.items() if (fnum(events.get(name)) or 0.0) >= CLOCK_LIMIT_SHARE}
    return [word for word in dict.fromkeys(CLOCK_LIMITS.values()) if word in held]


def clock_limits_note(rec: dict[str, Any]) -> str:
    """What follows a shown clock, the same in the terminal and the report: ' (power cap)' (clock_limits in
    parentheses), '' where nothing held it."""
    limits = clock_limits(rec)
    return f" ({', '.join(limits)})" if limits else ""


def speedup_interval(rec: dict[str, Any]) -> tuple[float, float] | None:
    """The speedup's 95% interval (`speedup_vs_eager_ci_low`, `_high`); None when either end is missing (older
    stores, a case without an interleaved eager) or they are not an interval."""
    low, high = fnum(rec.get("speedup_vs_eager_ci_low")), fnum(rec.get("speedup_vs_eager_ci_high"))
    if low is None or high is None or low > high:
        return None
    return low, high


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two closed intervals share a point."""
    return a[0] <= b[1] and b[0] <= a[1]


def eager_headline_ms(rec: dict[str, Any]) -> float | None:
    """Eager's headline (ms) as timed beside the case's backend (`eager_headline_ms`; the timer's median for older
    records)."""
    return fnum(rec.get("eager_headline_ms")) or fnum(rec.get("eager_latency_ms_median"))


def eager_apart(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """How far eager's own headline differs between two cases (max / min - 1); None when either lacks it."""
    ea, eb = eager_headline_ms(a), eager_headline_ms(b)
    return None if not ea or not eb else max(ea, eb) / min(ea, eb) - 1


def eager_moved_between(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether eager's own headline differs by more than EAGER_APART_REL between two cases."""
    return (eager_apart(a, b) or 0.0) > EAGER_APART_REL


def eager_and_own_ms(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, str]:
    """('0.107 / 0.124', '0.0896 / 0.0916'): eager's headline beside each of two cases, then their own (ms)."""
    def both(ms_of: Callable[[dict[str, Any]], float | None]) -> str:
        return " / ".join(f"{x:.3g}" if x else "-" for x in (ms_of(a), ms_of(b)))

    return both(eager_headline_ms), both(headline_ms)
