"""What `compare` reads of each side's headline latency beside the figure: the SM clock it ran at, and the noise
that can have moved it.

The clock: the median over the headline's samples (`headline_sm_clock_mhz_median`); a record written before that
existed falls back to NVML's median over the whole timing window (`sm_clock_mhz`: the timer's pass included, read
in 15 MHz steps), a coarser stand-in that is labelled "(NVML)" wherever compare shows it. The CPU has neither.

The noise: the headline's own reasons (`headline_quality` noisy, `headline_noise_reasons`), or in a record written
before the headline was judged on its own, the case's (`measurement_quality`, `noise_reasons`); either way only
those that can move the headline's method. Host load cannot move a headline read on the device (the CUPTI span;
in records without `headline_method`, the timer's CUDA events on a GPU), as harness/measure/noise.py judges it;
the run's own gated workers on the GPU count in the case's summary, never against the headline. The case's
reasons about the timer's samples (TIMER_SPREAD) speak of the headline only where the headline is the timer's
figure: the CUPTI span is read apart from the timer, so the timer's spread says nothing of it.
"""
from __future__ import annotations

from typing import Any

from bakeoff.results.report.data import fnum, metric_value
from bakeoff.results.report.headline_facts import (headline_clock_mhz, headline_kcycles, headline_quality,
                                                   judged_on_its_own)

HEADLINE_CLOCK = "headline"  # the clock over the headline's own samples
NVML_WINDOW = "NVML"  # NVML's median over the timing window, for records without the headline's
DEVICE_METHODS = ("cupti-span", "cupti-kernel-sum")  # headline methods read on the device (harness/measure/noise.py)
HOST_LOAD = "host load:"  # how noise.py starts a host-load reason
GATED_WORKERS = "gated worker(s) of this run"  # how noise.py names the run's own workers on the GPU
# How noise.py starts the case's reasons about the timer's samples (`samples_ms`, `eager_samples_ms`)
TIMER_SPREAD = ("backend IQR/median", "backend drifted", "eager reference IQR/median", "eager reference drifted")


def latency_clock(rec: dict[str, Any]) -> tuple[float | None, str | None]:
    """(MHz, source) of the clock a side's latency ran at: the headline's (HEADLINE_CLOCK), else NVML's window
    median (NVML_WINDOW); (None, None) without either (the CPU)."""
    mhz = headline_clock_mhz(rec)
    if mhz is not None:
        return mhz, HEADLINE_CLOCK
    window = fnum(rec.get("sm_clock_mhz"))
    return (window, NVML_WINDOW) if window is not None and window > 0 else (None, None)


def latency_kcycles(rec: dict[str, Any], source: str | None) -> float | None:
    """The headline in thousands of SM cycles at the clock `latency_clock` gave: headline_kcycles for the
    headline's own clock (each call's where recorded), the headline times NVML's median for NVML's."""
    if source == HEADLINE_CLOCK:
        return headline_kcycles(rec)
    ms, mhz = metric_value(rec, "headline_ms"), latency_clock(rec)[0]
    return ms * mhz if source == NVML_WINDOW and ms is not None and mhz is not None else None


def clock_text(mhz: float, source: str | None, unit: bool = True) -> str:
    """'1980 MHz', '1980 MHz (NVML)'; without `unit`, '1980', '1980 (NVML)'."""
    return f"{mhz:.0f}{' MHz' if unit else ''}" + (f" ({NVML_WINDOW})" if source == NVML_WINDOW else "")


def device_timed(rec: dict[str, Any]) -> bool:
    """The headline was read on the device: its `headline_method`, else (older records) the timer's CUDA events
    on a GPU."""
    method = rec.get("headline_method")
    if method:
        return method in DEVICE_METHODS
    return (str(rec.get("device") or "").startswith("cuda")
            and str(rec.get("timing_method") or "").startswith("cuda-events"))


def timer_is_headline(rec: dict[str, Any]) -> bool:
    """The headline is the timer's figure (the CPU, records before the headline), not the CUPTI span."""
    method = rec.get("headline_method")
    return not method or method == rec.get("timing_method")


def moves_headline(reason: str, rec: dict[str, Any]) -> bool:
    """Whether what `reason` names can move `rec`'s headline: not the run's own gated workers, not host load
    beside a headline read on the device, not the timer's spread beside a headline that is not the timer's."""
    if GATED_WORKERS in reason:
        return False
    if reason.startswith(TIMER_SPREAD) and not timer_is_headline(rec):
        return False
    return not (reason.startswith(HOST_LOAD) and device_timed(rec))


def latency_noise(rec: dict[str, Any]) -> list[str]:
    """The reasons a side's headline latency is noisy, those that can move its method only, host load before the
    rest (the cause, where the rest are its symptoms: spread, drift); [] when it is not noisy (clean, 'clock', or
    noisy only by what cannot move it)."""
    if headline_quality(rec) != "noisy":
        return []
    reasons = rec.get("headline_noise_reasons") if judged_on_its_own(rec) else rec.get("noise_reasons")
    if not reasons:
        return ["noisy"]
    return sorted((str(r) for r in reasons if moves_headline(str(r), rec)),
                  key=lambda r: not r.startswith(HOST_LOAD))  # stable otherwise


def latency_noise_notes(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """'candidate: reasons', 'base: reasons' for each side whose latency is noisy (latency_noise), the candidate
    first: the run a nightly job asks about, whose reasons a cut line must keep."""
    return [f"{side}: {'; '.join(noise)}" for side, noise in (("candidate", latency_noise(cand)),
                                                               ("base", latency_noise(base))) if noise]
