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
  concurrent compiles moved those figures by at most 0.6%, benchmarks/gate_disturbance.py, 2026-12-01; the
  load is still recorded): other processes used more than HOST_SHARE_LIMIT (10%) of the CPUs this worker
  may run on during the timing window (a dedicated machine's background stays at a few percent; 10% is one busy core of
  ten, or one of two cores half the time), or the timing thread waited for a CPU (runnable, not running)
  more than RUN_DELAY_LIMIT (5%) of the window: that wait is inside host-timed samples and delays dispatch.
- Other GPU processes: NVML saw another process use the GPU during the timing window.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

DRIFT_FLOOR = 0.10
DRIFT_MIN_SAMPLES = 15
HOST_SHARE_LIMIT = 0.10
RUN_DELAY_LIMIT = 0.05


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
    out = [("backend", list(rec.get("samples") or []), rec.get("latency_iqr_rel"))]
    if paired:
        eager = list(rec.get("eager_samples") or [])
        out.append(("eager reference", eager, iqr_rel(eager)))
    return out


def assess(rec: dict[str, Any], target_iqr: float, paired: bool, host_clock: bool = True) -> dict[str, Any]:
    """The record's measurement_quality ('clean' or 'noisy'), noise_reasons (list of text), and the numbers
    judged: latency_drift_rel, eager_drift_rel and eager_iqr_rel (None where not judged). `paired` says an
    eager reference was timed interleaved with the backend (every case but eager's own); `host_clock` that
    the case's figures are read from the host clock (then host load makes it noisy)."""
    reasons: list[str] = []
    fields: dict[str, Any] = {}
    for who, samples, iqr in _targets(rec, paired):
        key = "latency" if who == "backend" else "eager"
        if key == "eager":
            fields["eager_iqr_rel"] = iqr
        if iqr is not None and iqr > target_iqr:
            reasons.append(f"{who} IQR/median {iqr:.3g} missed the target {target_iqr:g} ({iqr / target_iqr:.3g}x)")
        drift = drift_rel(samples)
        fields[f"{key}_drift_rel"] = drift
        if drift is not None and drift > drift_limit(target_iqr):
            meds = [float(np.median(p)) for p in np.array_split(np.asarray(samples, dtype=np.float64), 3)]
            reasons.append(f"{who} drifted during the case: medians of the first, middle and last third of its "
                           f"{len(samples)} samples {meds[0]:.3g} / {meds[1]:.3g} / {meds[2]:.3g} ms differ by "
                           f"{drift:.0%} (limit {drift_limit(target_iqr):.0%})")
    share, cpus = rec.get("host_other_cpu_share"), rec.get("host_cpus")
    if host_clock and share is not None and share > HOST_SHARE_LIMIT:
        reasons.append(f"host load: other processes used {share * (cpus or 1):.2g} of {cpus} CPU(s) "
                       f"({share:.0%}, limit {HOST_SHARE_LIMIT:.0%}) during timing")
    delay = rec.get("host_run_delay_share")
    if host_clock and delay is not None and delay > RUN_DELAY_LIMIT:
        reasons.append(f"host load: the timing thread waited for a CPU {delay:.0%} of the timing window "
                       f"(limit {RUN_DELAY_LIMIT:.0%})")
    others = rec.get("gpu_other_processes")
    if others:
        pids = ", ".join(str(p.get("pid")) for p in others[:5]) + (", ..." if len(others) > 5 else "")
        what = "held a context on" if any(p.get("activity") == "unknown" for p in others) else "used"
        reasons.append(f"{len(others)} other process(es) {what} the GPU during timing (pid {pids})")
    return {"measurement_quality": "noisy" if reasons else "clean", "noise_reasons": reasons, **fields}
