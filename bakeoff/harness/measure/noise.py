"""Measurement quality of a timed case: `clean`, or `noisy` with the reasons, from the record's own numbers.

A case is noisy when any of these holds (each reason names who and by how much):
- IQR target missed: the backend's or the interleaved eager reference's IQR/median is above `target_iqr`
  (the timer stopped at its budget or max_reps before converging).
- Drift: the medians of the first, middle and last third of a target's samples (in time order) differ by
  more than DRIFT_LIMIT = max(10%, 2 x target_iqr) of the smallest. At the default 5% target a sample set
  has sigma ~ IQR / 1.35 = 3.7% of the median; the median of a third of n >= 15 samples (>= 5 each) then
  has a standard error under 1.25 x 3.7% / sqrt(5) = 2.1%, and the range of three such medians stays below
  10% (over 3 standard errors of a difference) unless the level moved. A jump such as eager's 1.4 ms ->
  32 ms is a factor of 20. With fewer than 15 samples drift is not judged (None).
- Host load, for figures read from the host clock (on the CPU, and backends timed with the host clock on a
  GPU; a GPU backend timed with CUDA events and the CUPTI span is not judged by it: on the H200 five
  concurrent compiles moved those figures by at most 0.6%, benchmarks/gate_disturbance.py; the
  load is still recorded): other processes used more than HOST_SHARE_LIMIT (10%) of the CPUs this worker
  may run on during the timing window (a dedicated machine's background stays at a few percent; 10% is one busy core of
  ten, or one of two cores half the time), or the timing thread waited for a CPU (runnable, not running)
  more than RUN_DELAY_LIMIT (5%) of the window: that wait is inside host-timed samples and delays dispatch.
- Other GPU processes: NVML saw another process use the GPU during the timing window. The run's own workers
  under the same gate (`gated_sibling`) count here, in the case's summary, but not against the headline or the
  speedup: they cannot time, check or search while this case times, and what the gate lets them run beside it
  (a compile's first run, under `beside_compiles`) shows in the headline's own samples if it moves them; NVML's
  per-process samples also straddle the gate's hand-over. An outsider counts everywhere.
These make `measurement_quality`, the case's overall summary. Each figure is also judged on its own:
- `headline_quality` (with `headline_noise_reasons`): the absolute headline latencies, from their own samples
  (`device_span_samples_ms` for the CUPTI span, else the timer's `samples_ms`) and the eager reference's, by the
  IQR and drift rules above; other GPU processes; an SM-clock drop during the headline's samples (more than
  CLOCK_LOW_SHARE_LIMIT (20%) of the clock readings more than CLOCK_DROP_LIMIT (10%) under their median) where
  a judged series also spread (a drop that neither series shows did not move the latency: on an H100 the
  marker clock of a power-capped GEMM read 1598-1969 MHz around calls that took 1.52-1.58 ms); host
  load only where the headline is host-timed (not a DEVICE_METHODS method). A spread the SM clock can account
  for is still a spread of the latency, and its reason names the clock: from each call's own clock where the
  record has it read on the device (`device_span_sm_clock_mhz`, the PM sampler's or the markers',
  results/call_clocks.py:
  the spread of the samples in SM cycles, time x clock, judged by the same limits), else from NVML's clock range
  over the samples (`clock_explains`). NVML's reading changes in steps (on the H200 about every ten calls of a
  few ms) and need not follow the calls' own clock: that note is context for a spread the samples show, never
  a reason by itself.
  Where every reason is one the calls' own clocks account for (a series' spread that is within the limits in
  SM cycles; a clock drop while every judged series has its per-call clocks and is within them in cycles), the
  quality is `clock`, not `noisy`: each call took the cycles it takes and the GPU ran them at a clock that moved
  (a power-capped GPU under sustained compute-bound load). The latency is then a figure at the clock recorded
  beside it (`headline_sm_clock_mhz_median`, which the terminal and the report show with it), and its reasons
  stay in `headline_noise_reasons`. NVML's clock range never makes `clock`: only clocks read on the
  device for each call are evidence about the calls.
- `speedup_quality` (with `speedup_noise_reasons`; None for eager's own case): the speedup, judged on the
  paired ratios eager_i / backend_i of the headline's interleaved samples (`speedup_iqr_rel`,
  `speedup_drift_rel`) by the same IQR and drift limits. Sample i of the backend and of eager ran back to back,
  so what moves the whole GPU between pairs (the SM clock settling under sustained load) moves both and cancels
  in their ratio; what hits one side (the backend's own jump, another process's kernels landing on some
  samples) spreads the ratios. Judged strictly as well: an outsider on the GPU (it need not land evenly) and
  host load for a host-timed headline. Both absolute series spread together while the ratios hold steady is a
  noisy latency (with or without the clock to account for it), not a noisy speedup: whatever moved them moved
  both sides of each pair alike.
- `host_quality` (with `host_noise_reasons`): the host-clock figures, by host load alone.
The terminal's "~" after a speedup, the report's speedup views and `compare`'s speedup read `speedup_quality`
(`headline_quality` where it is None); a latency reads `headline_quality`.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from bakeoff.results.call_clocks import per_call_clocks

DRIFT_FLOOR = 0.10
DRIFT_MIN_SAMPLES = 15
HOST_SHARE_LIMIT = 0.10
RUN_DELAY_LIMIT = 0.05
CLOCK_DROP_LIMIT = 0.10
# A median moves little while few of its samples are slow: with 20% of them slowed, the median of spans whose
# IQR is 5% of it moves to about their 62nd percentile, about 1% up; a short dip (one NVML reading in a
# power-capped GPU's boost changes) is not noise of the headline.
CLOCK_LOW_SHARE_LIMIT = 0.20
DEVICE_METHODS = ("cupti-span", "cupti-kernel-sum")  # headline methods read from the device, not the host


def drift_limit(target_iqr: float) -> float:
    """The relative spread of third-medians above which a target drifted."""
    return max(DRIFT_FLOOR, 2.0 * target_iqr)


def drift_rel(samples_ms: Sequence[float]) -> float | None:
    """(largest - smallest) / smallest of the medians of the first, middle and last third of the samples,
    in the order taken; None with fewer than DRIFT_MIN_SAMPLES samples or a non-positive median."""
    if len(samples_ms) < DRIFT_MIN_SAMPLES:
        return None
    meds = [float(np.median(part)) for part in np.array_split(np.asarray(samples_ms, dtype=np.float64), 3)]
    low = min(meds)
    return (max(meds) - low) / low if low > 0 else None


def iqr_rel(samples_ms: Sequence[float]) -> float | None:
    """(p75 - p25) / median, as the timer computes it; None without samples."""
    if not samples_ms:
        return None
    p25, med, p75 = np.percentile(np.asarray(samples_ms, dtype=np.float64), [25, 50, 75])
    return float((p75 - p25) / med) if med > 0 else None


def _targets(rec: dict[str, Any], paired: bool) -> list[tuple[str, list[float], float | None]]:
    """(who, samples, IQR/median) of the backend and, when timed beside it, the eager reference."""
    out = [("backend", list(rec.get("samples_ms") or []), rec.get("latency_iqr_rel"))]
    if paired:
        eager = list(rec.get("eager_samples_ms") or [])
        out.append(("eager reference", eager, iqr_rel(eager)))
    return out


def _spread_reasons(who: str, samples: Sequence[float], iqr: float | None, target_iqr: float,
                    unit: str = " ms", note: str = "") -> list[str]:
    """The IQR-target and drift reasons of one series (each followed by `note` when given)."""
    reasons = []
    if iqr is not None and iqr > target_iqr:
        reasons.append(f"{who} IQR/median {iqr:.3g} missed the target {target_iqr:g} ({iqr / target_iqr:.3g}x)")
    drift = drift_rel(samples)
    if drift is not None and drift > drift_limit(target_iqr):
        meds = [float(np.median(p)) for p in np.array_split(np.asarray(samples, dtype=np.float64), 3)]
        reasons.append(f"{who} drifted during the case: medians of the first, middle and last third of its "
                       f"{len(samples)} samples {meds[0]:.3g} / {meds[1]:.3g} / {meds[2]:.3g}{unit} differ by "
                       f"{drift:.0%} (limit {drift_limit(target_iqr):.0%})")
    return [r + note for r in reasons]


def spread_rel(samples: Sequence[float], iqr: float | None = None) -> float | None:
    """The larger of a series' IQR/median (`iqr` when given) and its drift; None without samples."""
    parts = [x for x in (iqr if iqr is not None else iqr_rel(samples), drift_rel(samples)) if x is not None]
    return max(parts) if parts else None


def missed(samples: Sequence[float], iqr: float | None, target_iqr: float) -> bool:
    """The series missed the IQR target or drifted (the rules of `_spread_reasons`)."""
    drift = drift_rel(samples)
    return (iqr is not None and iqr > target_iqr) or (drift is not None and drift > drift_limit(target_iqr))


def clock_range(rec: dict[str, Any]) -> tuple[float, float] | None:
    """(lowest, highest) SM clock in MHz over the headline's samples: the headline's own readings
    (`headline_sm_clock_mhz_min`, `headline_sm_clock_mhz_max`), the whole timing window's highest
    (`sm_clock_mhz_max`) in records without the headline's; None without a reading."""
    low = rec.get("headline_sm_clock_mhz_min")
    high = rec.get("headline_sm_clock_mhz_max") or rec.get("sm_clock_mhz_max")
    if not low or not high or high < low:
        return None
    return float(low), float(high)


def clock_explains(spread: float | None, rec: dict[str, Any]) -> bool:
    """The SM clock moved enough over the headline's samples to account for a relative spread `spread` of a
    series: highest / lowest clock - 1 is at least `spread`. A call's time follows 1 / clock at most (fully
    compute-bound; less where memory or launches bound it), so a clock that moved less cannot explain it."""
    rng = clock_range(rec)
    return spread is not None and rng is not None and rng[1] / rng[0] - 1.0 >= spread


def cycles(samples_ms: Sequence[float], clocks_mhz: Sequence[float] | None) -> list[float] | None:
    """Each sample in SM cycles (ms x MHz = thousands of cycles), with the clock read during that call
    (`device_span_sm_clock_mhz`); None unless every sample has a positive clock."""
    if not clocks_mhz or len(clocks_mhz) != len(samples_ms) or not all(c and c > 0 for c in clocks_mhz):
        return None
    return [float(x) * float(c) for x, c in zip(samples_ms, clocks_mhz)]


def steady_in_cycles(in_cycles: Sequence[float] | None, target_iqr: float) -> bool:
    """A series in SM cycles (`cycles`) is within the IQR and drift limits; False without one."""
    return in_cycles is not None and not missed(in_cycles, iqr_rel(in_cycles), target_iqr)


def _series_note(samples: Sequence[float], iqr: float | None, in_cycles: Sequence[float] | None, steady: bool,
                 rec: dict[str, Any]) -> str:
    """What the SM clock says of a series' spread: from each call's own clock where the record has it (the
    spread in cycles, `in_cycles`, `steady` within the limits), else from the clock's range over the samples
    (clock_explains)."""
    if in_cycles is not None:
        left = spread_rel(in_cycles) or 0.0
        verdict = "the clock accounts for it" if steady else "not the clock alone"
        return f"; in SM cycles (each call's time x its clock) the spread is {left:.1%}: {verdict}"
    return _clock_note(rec) if clock_explains(spread_rel(samples, iqr), rec) else ""


def _clock_note(rec: dict[str, Any]) -> str:
    rng = clock_range(rec)
    assert rng is not None
    return (f"; the SM clock moved {rng[0]:.0f}-{rng[1]:.0f} MHz ({rng[1] / rng[0] - 1:.0%}) over the samples, "
            f"enough to account for it (the GPU's clock under sustained load)")


def paired_ratios(backend_ms: Sequence[float], eager_ms: Sequence[float]) -> list[float]:
    """eager_ms[i] / backend_ms[i] over the interleaved pairs in time order (the longer series cut to the
    shorter); pairs with a non-positive or non-finite sample are left out."""
    n = min(len(backend_ms), len(eager_ms))
    b, e = np.asarray(backend_ms[:n], dtype=np.float64), np.asarray(eager_ms[:n], dtype=np.float64)
    keep = np.isfinite(b) & np.isfinite(e) & (b > 0) & (e > 0)
    return [float(x) for x in e[keep] / b[keep]]


def _host_load_reasons(rec: dict[str, Any]) -> list[str]:
    """Host load over the timing window: other processes' CPU share, the timing thread's run delay."""
    reasons = []
    share, cpus = rec.get("host_other_cpu_share"), rec.get("host_cpus")
    if share is not None and share > HOST_SHARE_LIMIT:
        reasons.append(f"host load: other processes used {share * (cpus or 1):.2g} of {cpus} CPU(s) "
                       f"({share:.0%}, limit {HOST_SHARE_LIMIT:.0%}) during timing")
    delay = rec.get("host_run_delay_share")
    if delay is not None and delay > RUN_DELAY_LIMIT:
        reasons.append(f"host load: the timing thread waited for a CPU {delay:.0%} of the timing window "
                       f"(limit {RUN_DELAY_LIMIT:.0%})")
    return reasons


def _gpu_reasons(rec: dict[str, Any], siblings: bool = True) -> list[str]:
    """Other processes NVML saw on the GPU during the timing window; without `siblings`, outsiders only (not
    the run's own gated workers, GpuProcess.gated_sibling)."""
    others = [p for p in rec.get("gpu_other_processes") or [] if siblings or not p.get("gated_sibling")]
    if not others:
        return []
    pids = ", ".join(str(p.get("pid")) for p in others[:5]) + (", ..." if len(others) > 5 else "")
    what = "held a context on" if any(p.get("activity") == "unknown" for p in others) else "used"
    who = ("gated worker(s) of this run" if all(p.get("gated_sibling") for p in others)
           else "other process(es)")
    return [f"{len(others)} {who} {what} the GPU during timing (pid {pids})"]


def _clock_reasons(rec: dict[str, Any]) -> list[str]:
    """An SM-clock drop during the headline's samples that lasted long enough to move their median (judged only
    beside a spread of the samples themselves, `_headline_reasons`): more than
    CLOCK_LOW_SHARE_LIMIT of the clock readings over CLOCK_DROP_LIMIT under their median (records without the
    share: any reading that low)."""
    med, low = rec.get("headline_sm_clock_mhz_median"), rec.get("headline_sm_clock_mhz_min")
    if not med or low is None or low >= med * (1.0 - CLOCK_DROP_LIMIT):
        return []
    share = rec.get("headline_sm_clock_low_share")
    if share is None:
        return [f"SM clock dropped to {low:.0f} MHz during the headline's samples ({1 - low / med:.0%} under "
                f"their median {med:.0f} MHz, limit {CLOCK_DROP_LIMIT:.0%})"]
    if share <= CLOCK_LOW_SHARE_LIMIT:
        return []
    return [f"SM clock over {CLOCK_DROP_LIMIT:.0%} under its median {med:.0f} MHz for {share:.0%} of the "
            f"headline's clock readings (lowest {low:.0f} MHz; limit {CLOCK_LOW_SHARE_LIMIT:.0%} of them)"]


def headline_device_timed(rec: dict[str, Any]) -> bool:
    """The headline is read from the device (the CUPTI span), which host load does not move."""
    return rec.get("headline_method") in DEVICE_METHODS


def _headline_series(rec: dict[str, Any], paired: bool) -> tuple[list[float], float | None, list[float]]:
    """The backend's headline samples, their IQR/median, and eager's headline samples (empty unless paired)."""
    key = "device_span_samples_ms" if headline_device_timed(rec) else "samples_ms"
    mine = list(rec.get(key) or [])
    iqr = rec.get("headline_iqr_rel", iqr_rel(mine) if mine else None)
    return mine, iqr, list(rec.get(f"eager_{key}") or []) if paired else []


def _headline_host_timed(rec: dict[str, Any], host_clock: bool) -> bool:
    return not headline_device_timed(rec) if rec.get("headline_method") else host_clock


def _headline_reasons(rec: dict[str, Any], target_iqr: float, paired: bool,
                      host_clock: bool) -> tuple[list[str], list[str]]:
    """What makes the absolute headline latencies noisy (module docstring), and those of the reasons that the
    calls' own SM clocks account for; a spread the clock accounts for says so."""
    mine, iqr, eager = _headline_series(rec, paired)
    spans = headline_device_timed(rec)
    series = [("backend headline", mine, iqr, "")]
    series += [("eager headline", eager, iqr_rel(eager), "eager_")] if paired else []
    reasons: list[str] = []
    accounted: list[str] = []
    steady = True  # every judged series has its per-call device clocks and is within the limits in cycles
    for who, samples, spread, prefix in series:
        in_cycles = cycles(samples, per_call_clocks(rec, prefix) if spans else None)
        in_limits = steady_in_cycles(in_cycles, target_iqr)
        steady = steady and in_limits
        found = _spread_reasons(who, samples, spread, target_iqr,
                                note=_series_note(samples, spread, in_cycles, in_limits, rec))
        reasons += found
        accounted += found if in_limits else []
    host = _host_load_reasons(rec) if _headline_host_timed(rec, host_clock) else []
    drop = _clock_reasons(rec) if reasons else []  # a drop the samples do not show did not move the latency
    accounted += drop if steady else []
    return reasons + host + _gpu_reasons(rec, siblings=False) + drop, accounted


def _speedup_reasons(rec: dict[str, Any], target_iqr: float, host_clock: bool) -> tuple[list[str], dict[str, Any]]:
    """What makes the speedup noisy (module docstring) and the numbers judged (speedup_iqr_rel,
    speedup_drift_rel); ([], {}) when the headline has no paired samples."""
    mine, iqr, eager = _headline_series(rec, paired=True)
    ratios = paired_ratios(mine, eager)
    if not ratios:
        return [], {}
    fields = {"speedup_iqr_rel": iqr_rel(ratios), "speedup_drift_rel": drift_rel(ratios)}
    reasons = _spread_reasons("speedup: the paired ratios eager/backend", ratios, fields["speedup_iqr_rel"],
                              target_iqr, unit="")
    host = _host_load_reasons(rec) if _headline_host_timed(rec, host_clock) else []
    return reasons + host + _gpu_reasons(rec, siblings=False), fields


def _quality(reasons: list[str], accounted: Sequence[str] = ()) -> str:
    """'clean' without reasons; 'clock' when the calls' own SM clocks account for every one; else 'noisy'."""
    if not reasons:
        return "clean"
    return "clock" if all(r in accounted for r in reasons) else "noisy"


def assess(rec: dict[str, Any], target_iqr: float, paired: bool, host_clock: bool = True) -> dict[str, Any]:
    """The record's measurement_quality ('clean' or 'noisy'; the case's overall summary), noise_reasons (list
    of text), headline_quality ('clean', 'clock' or 'noisy') and headline_noise_reasons (the absolute headline
    latencies), speedup_quality and speedup_noise_reasons (the speedup, from the paired ratios; None unless
    paired), host_quality and
    host_noise_reasons (the host-clock figures), and the numbers judged: latency_drift_rel, eager_drift_rel,
    eager_iqr_rel, speedup_iqr_rel and speedup_drift_rel (None where not judged). `paired` says an eager
    reference was timed interleaved with the backend (every case but eager's own); `host_clock` that the case's
    timer figures are read from the host clock (then host load makes the summary noisy)."""
    reasons: list[str] = []
    fields: dict[str, Any] = {}
    for who, samples, iqr in _targets(rec, paired):
        key = "latency" if who == "backend" else "eager"
        if key == "eager":
            fields["eager_iqr_rel"] = iqr
        fields[f"{key}_drift_rel"] = drift_rel(samples)
        reasons += _spread_reasons(who, samples, iqr, target_iqr)
    host = _host_load_reasons(rec)
    reasons += (host if host_clock else []) + _gpu_reasons(rec)
    head, accounted = _headline_reasons(rec, target_iqr, paired, host_clock)
    speedup, judged = _speedup_reasons(rec, target_iqr, host_clock) if paired else ([], {})
    return {"measurement_quality": _quality(reasons), "noise_reasons": reasons,
            "headline_quality": _quality(head, accounted), "headline_noise_reasons": head,
            "speedup_quality": _quality(speedup) if judged else None,
            "speedup_noise_reasons": speedup if judged else None,
            "speedup_iqr_rel": judged.get("speedup_iqr_rel"), "speedup_drift_rel": judged.get("speedup_drift_rel"),
            "host_quality": _quality(host), "host_noise_reasons": host, **fields}
