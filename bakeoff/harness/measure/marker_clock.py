"""The SM clock read on the device, from the marker kernels that tell the CUPTI pass's calls apart.

Each marker of the pass (measure/device_time.py) is spin kernels launched back to back on one stream
(MARK_SPINS): a short warm-up spin, `torch.cuda._sleep(MARK_SHORT_CYCLES)`, then
`torch.cuda._sleep(MARK_LONG_CYCLES)`, each one thread spinning until `clock64()` has advanced that many SM
cycles (aten/src/ATen/cuda/Sleep.cu). A spin's CUPTI duration is a fixed overhead (its launch on the device, its
block's start, the loop's last turn) plus its cycles at the SM clock, so the difference of the last two durations
is MARK_SHORT_CYCLES cycles and nothing else:

    f_sm (MHz) = MARK_SHORT_CYCLES / (long_us - short_us)

A Hopper GPU runs one SM clock for the whole chip, so the markers right before and right after a call (tens
of microseconds away from its kernels) read the clock at the call's edges; the call's clock is the mean of the
two readings, and both are kept. That is the clock the call ran at unless the call itself drives the GPU to its
power limit: around a power-capped matmul the markers read 11-34% above the clock its own programs counted on
an H200 (docs/MEASUREMENT.md), so cycles from this clock are right in direction, not in size, for such calls.
A pair whose long spin is not the longer, or a reading outside what a GPU runs at (MIN_MHZ to MAX_MHZ), is no
reading: the call then has no marker clock, never a wrong one.
"""
from __future__ import annotations

from typing import Sequence

# The cycles the clock is read over: the long spin minus the short one. CUPTI's kernel timestamps on Hopper
# step every 32 ns, so the two durations' difference is off by four steps (0.13 µs) at worst and far less
# typically; 20000 cycles (10 µs at 1980 MHz, 18 µs at 1110 MHz) then read the clock within about 1% at
# worst, near NVML's own step (15 MHz), while a whole marker (61000 cycles of one thread: 31-55 µs)
# stays far shorter than the power controller's millisecond steps, so it does not move the clock it reads.
MARK_SHORT_CYCLES = 20_000
MARK_LONG_CYCLES = 2 * MARK_SHORT_CYCLES
# A marker's first spin, short, read by no clock: the spin that finds the spin kernel's code and launch state
# cold (after a call or the flush evicted them) is this one, so the short and the long spin after it start
# alike and their fixed overheads cancel; a cold start a few hundred ns longer would otherwise read a clock a
# few percent high.
MARK_WARM_CYCLES = 1_000
MARK_SPINS = (MARK_WARM_CYCLES, MARK_SHORT_CYCLES, MARK_LONG_CYCLES)  # one marker, in launch order
# What an SM clock can be: a reading outside this range is a broken pair, not a clock.
MIN_MHZ = 100.0
MAX_MHZ = 3500.0

Edges = tuple[float | None, float | None]  # the clock (MHz) read by the marker before and the marker after a call


def spin_pair_mhz(short_us: float, long_us: float,
                  cycles: int = MARK_LONG_CYCLES - MARK_SHORT_CYCLES) -> tuple[float | None, str | None]:
    """The SM clock (MHz) from the CUPTI durations (µs) of a marker's short and long spin, whose cycles differ
    by `cycles`: (MHz, None), or (None, why) when the pair gives no plausible reading."""
    diff_us = long_us - short_us
    if not diff_us > 0:
        return None, f"its long spin ({long_us:.3f} µs) is not longer than its short one ({short_us:.3f} µs)"
    mhz = cycles / diff_us
    if not MIN_MHZ <= mhz <= MAX_MHZ:
        return None, (f"it read {mhz:.0f} MHz ({short_us:.3f} µs and {long_us:.3f} µs spins), outside "
                      f"{MIN_MHZ:.0f}-{MAX_MHZ:.0f} MHz")
    return mhz, None


def call_edges(before: tuple[float, float], after: tuple[float, float]) -> tuple[Edges, str | None]:
    """A call's marker readings from the (short µs, long µs) spin durations of the marker before it and the
    marker after it; the reason for the first that gave none (None when both read)."""
    (mhz_before, why_before), (mhz_after, why_after) = spin_pair_mhz(*before), spin_pair_mhz(*after)
    reasons = [f"the marker {where} it: {why}" for where, why in (("before", why_before), ("after", why_after)) if why]
    return (mhz_before, mhz_after), "; ".join(reasons) or None


def per_call_mhz(edges: Sequence[Edges], reasons: Sequence[str | None]) -> tuple[list[float], str | None]:
    """Each call's clock (MHz), the mean of its two marker readings, when every call has both; else [] and why
    (how many calls lack one, and the first's reason). ([], None) when no call carries a marker reading at all
    (figures not taken from a marked timeline)."""
    if not edges or all(e == (None, None) and not r for e, r in zip(edges, reasons)):
        return [], None
    missing = [i for i, e in enumerate(edges) if e[0] is None or e[1] is None]
    if missing:
        first = missing[0]
        why = reasons[first] if first < len(reasons) and reasons[first] else "no marker reading"
        return [], f"{len(missing)} of {len(edges)} profiled calls without a marker clock; call {first}: {why}"
    return [(float(a) + float(b)) / 2.0 for a, b in edges], None  # type: ignore[arg-type]
