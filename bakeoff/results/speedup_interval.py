"""How sure a case's speedup over eager is: a 95% interval of `speedup_vs_eager` from the case's paired samples.

The backend and eager beside it are timed interleaved (A, B, A, B, ...: harness/measure/timing.py measure and
device_time.py profile_device_time), so sample i of the one and sample i of the other saw the same moment of
the machine. The interval resamples those pairs with replacement (a paired percentile bootstrap) and takes,
for each resample, eager's median over the backend's median: the statistic `speedup_vs_eager` is. The seed is
fixed, so the same samples always give the same interval. The worker stores it at measurement time
(`speedup_vs_eager_ci_low`, `speedup_vs_eager_ci_high`); the report computes it the same way from the stored
samples of older records.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

LEVEL = 0.95
RESAMPLES = 2000
SEED = 0
# Fewer pairs than this give no interval: a median of three resampled values says little about its spread.
MIN_PAIRS = 5
# Resamples per numpy batch: bounds the memory of a long timer series (RESAMPLES x pairs floats at once).
_BATCH_CELLS = 2_000_000


def speedup_interval(backend_ms: Sequence[float], eager_ms: Sequence[float], level: float = LEVEL,
                     resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """(low, high): the `level` percentile-bootstrap interval of median(eager) / median(backend) over the
    pairs (backend_ms[i], eager_ms[i]), ms per call, in time order. Pairs with a missing, non-finite or
    non-positive sample are dropped; the longer series is cut to the shorter. None with fewer than MIN_PAIRS
    pairs."""
    n = min(len(backend_ms), len(eager_ms))
    b = np.asarray([_num(x) for x in backend_ms[:n]], dtype=float)
    e = np.asarray([_num(x) for x in eager_ms[:n]], dtype=float)
    keep = np.isfinite(b) & np.isfinite(e) & (b > 0) & (e > 0)
    b, e = b[keep], e[keep]
    n = len(b)
    if n < MIN_PAIRS:
        return None
    rng = np.random.default_rng(seed)
    per_batch = max(1, _BATCH_CELLS // n)
    ratios = []
    for start in range(0, resamples, per_batch):
        idx = rng.integers(0, n, size=(min(per_batch, resamples - start), n))
        ratios.append(np.median(e[idx], axis=1) / np.median(b[idx], axis=1))
    low, high = np.quantile(np.concatenate(ratios), [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def headline_pairs(case: Mapping[str, Any]) -> tuple[list[float], list[float]] | None:
    """The backend's and eager's samples behind the headline of a flat record (its columns): the CUPTI spans
    (`device_span_samples_ms`, `eager_device_span_samples_ms`) or the timer's (`samples_ms`, `eager_samples_ms`);
    None when the headline has no samples (the pipelined fallback) or eager's are missing (the case is eager
    itself)."""
    method = case.get("headline_method")
    if method == "cupti-span":
        pair = case.get("device_span_samples_ms"), case.get("eager_device_span_samples_ms")
    elif method is None or method == case.get("timing_method"):
        pair = case.get("samples_ms"), case.get("eager_samples_ms")
    else:
        return None
    if not pair[0] or not pair[1]:
        return None
    return list(pair[0]), list(pair[1])


def case_speedup_interval(case: Mapping[str, Any]) -> tuple[float, float] | None:
    """The interval of a flat record from its headline's paired samples (see `headline_pairs`); None without
    them."""
    pairs = headline_pairs(case)
    return speedup_interval(*pairs) if pairs else None


def interval_fields(case: Mapping[str, Any]) -> dict[str, float | None]:
    """The record fields `speedup_vs_eager_ci_low` and `speedup_vs_eager_ci_high` of a case's figures (None
    without paired samples)."""
    ci = case_speedup_interval(case)
    return {"speedup_vs_eager_ci_low": ci[0] if ci else None, "speedup_vs_eager_ci_high": ci[1] if ci else None}


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")
