"""The GPU's SM clock during a timing window, sampled by NVML in a background thread.

GEMMs timed in short bursts run at a boosted clock that a sustained load does not keep (on the H200 bakeoff's
GEMM figures were 3-9% faster than do_bench's 200 ms loop on the same call). The record keeps the clock seen
while its figures were taken, so a boosted window is visible, and compare can tell clock from code.
Clocks are read, never set. The per-call clock of the CUPTI pass is read on the device by its markers where
they give one (measure/marker_clock.py); NVML's readings in each call's host window (`ClockSampler.at`) stand in
where they do not, a coarse fallback: on the H200 NVML's reading moved in steps about every ten calls and did
not follow the calls' spans. `settle_time_s` reads a clock trace taken under sustained load (the
`--clock-settle` mode of benchmarks/validate_timing.py): how long the clock takes to reach the level it keeps.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Sequence

import numpy as np

from bakeoff.harness.measure.environment import _nvml, _nvml_handle, clock_event_names, clock_events_reader

SAMPLE_PERIOD_S = 0.005
SETTLE_TOLERANCE = 0.02  # a clock within 2% of its final value has settled (NVML steps are 15 MHz, < 1% of it)
FINAL_SHARE = 0.2  # the final value: the median over the last fifth of the trace


class ClockSampler:
    """Samples the SM clock (MHz) of `device` every SAMPLE_PERIOD_S while entered; does nothing on the CPU or
    without NVML (then `fields()` says why). NVML calls release the GIL, so the timed thread is not held up
    for longer than a Python bytecode slice."""

    def __init__(self, device: str, period_s: float = SAMPLE_PERIOD_S) -> None:
        self.device, self.period_s = device, period_s
        self.samples_mhz: list[int] = []
        self.times_s: list[float] = []  # time.perf_counter() of each sample
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: Any = None
        self._nv: Any = None
        self._events_fn: Any = None  # NVML's clock event reasons, read with each clock sample where it has them
        self.event_masks: list[int] | None = None

    def __enter__(self) -> "ClockSampler":
        if not self.device.startswith("cuda"):
            return self
        self._nv = _nvml()
        if self._nv is None:
            self.error = "NVML unavailable"
            return self
        try:
            index = int(self.device.split(":")[1]) if ":" in self.device else 0
            self._handle = _nvml_handle(self._nv, index)
            self._events_fn = clock_events_reader(self._nv)
            self.event_masks = [] if self._events_fn is not None else None
            self._read()
        except Exception as exc:  # an NVML failure costs the clock figure, not the case
            self.error = f"{type(exc).__name__}: {exc}"[:300]
            return self
        self._thread = threading.Thread(target=self._loop, name="bakeoff-clock-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=1.0)
            try:
                self._read()  # the clock at the end of the window too, however short it was
            except Exception:
                pass

    def _read(self) -> None:
        mhz = int(self._nv.nvmlDeviceGetClockInfo(self._handle, self._nv.NVML_CLOCK_SM))
        self.times_s.append(time.perf_counter())
        self.samples_mhz.append(mhz)
        if self.event_masks is not None:
            try:
                self.event_masks.append(int(self._events_fn(self._handle)))
            except Exception:  # the reasons are an extra: without them the clock samples stand
                self.event_masks = None

    def event_shares(self) -> dict[str, float] | None:
        """The share of the samples in which each NVML clock event reason was set ('SwPowerCap': 0.6, ...; 'None'
        left out, so {} when none was); None where NVML gave no reasons."""
        if not self.event_masks:
            return None
        counts: dict[str, int] = {}
        for mask, n in collections.Counter(self.event_masks).items():
            for name in clock_event_names(self._nv, mask):
                if name != "None":
                    counts[name] = counts.get(name, 0) + n
        return {name: round(n / len(self.event_masks), 4) for name, n in sorted(counts.items())}

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._read()
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"[:300]
                return

    def at(self, windows_s: list[tuple[float, float]]) -> list[float]:
        """The SM clock (MHz) during each (start, end) `time.perf_counter()` window: the median of the readings
        inside it, else the reading nearest its middle (a call shorter than SAMPLE_PERIOD_S holds none); empty
        without readings."""
        if not self.samples_mhz or len(self.times_s) != len(self.samples_mhz):
            return []
        t, v = np.asarray(self.times_s), np.asarray(self.samples_mhz, dtype=np.float64)
        out = []
        for lo, hi in windows_s:
            inside = v[(t >= lo) & (t <= hi)]
            out.append(float(np.median(inside)) if inside.size else float(v[np.argmin(np.abs(t - (lo + hi) / 2))]))
        return out

    def low_share(self, below_rel: float) -> float | None:
        """The share of samples more than `below_rel` (relative) under their median; None without samples."""
        return low_share(self.samples_mhz, below_rel)

    def fields(self) -> dict[str, Any]:
        """`sm_clock_mhz` (median), `sm_clock_mhz_min`, `sm_clock_mhz_max`, `sm_clock_samples`, and
        `sm_clock_events` (event_shares) where NVML gave them; on a GPU without a reading, `sm_clock_error`; on
        the CPU, nothing."""
        if not self.device.startswith("cuda"):
            return {}
        if not self.samples_mhz:
            return {"sm_clock_error": self.error or "no sample taken"}
        a = np.asarray(self.samples_mhz)
        out: dict[str, Any] = {"sm_clock_mhz": float(np.median(a)), "sm_clock_mhz_min": int(a.min()),
                               "sm_clock_mhz_max": int(a.max()), "sm_clock_samples": int(a.size)}
        events = self.event_shares()
        if events is not None:
            out["sm_clock_events"] = events
        if self.error:
            out["sm_clock_error"] = self.error
        return out


def low_share(values_mhz: Sequence[float], below_rel: float) -> float | None:
    """The share of clock readings more than `below_rel` (relative) under their median; None without readings."""
    if not len(values_mhz):
        return None
    a = np.asarray(values_mhz, dtype=np.float64)
    return float(np.mean(a < np.median(a) * (1.0 - below_rel)))


def sustain_load(targets: list[Any], seconds: float, device: str) -> float:
    """Run `targets`' calls back to back for `seconds` (continuous load, as do_bench's long loop applies),
    synchronizing every few calls so the queue stays short. Returns the seconds actually spent."""
    if seconds <= 0:
        return 0.0
    import torch

    t0 = time.perf_counter()
    end = t0 + seconds
    while time.perf_counter() < end:
        for t in targets:
            for _ in range(4):
                t.call()
            t.sync()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    return time.perf_counter() - t0


def settle_time_s(elapsed_s: list[float], values: list[float], tolerance: float = SETTLE_TOLERANCE,
                  final_share: float = FINAL_SHARE) -> tuple[float | None, float | None]:
    """(seconds from the start of the trace until `values` stay within `tolerance` (relative) of their final
    value, that final value): the final value is the median of the samples in the last `final_share` of the
    trace's duration. The first time is 0.0 when every sample is within; None for either without samples. The
    time is also None when the trace is too short to tell: the values reach their final level only within the
    last `final_share`, or that last part is not level itself (the medians of its two halves differ by more than
    half the tolerance: a slow drift that has not ended)."""
    if not values or len(values) != len(elapsed_s):
        return None, None
    t = np.asarray(elapsed_s, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    final_from = t[0] + (1.0 - final_share) * (t[-1] - t[0])
    tail_t, tail = t[t >= final_from], v[t >= final_from]
    final = float(np.median(tail))
    halves = [part for part in (tail[tail_t < (final_from + t[-1]) / 2], tail[tail_t >= (final_from + t[-1]) / 2])
              if part.size]
    if len(halves) == 2 and abs(np.median(halves[0]) - np.median(halves[1])) > tolerance / 2 * abs(final):
        return None, final
    outside = np.flatnonzero(np.abs(v - final) > tolerance * abs(final))
    if outside.size == 0:
        return 0.0, final
    last = int(outside[-1])
    if last + 1 >= len(v) or t[last + 1] >= final_from:
        return None, final
    return float(t[last + 1] - t[0]), final


def binned(elapsed_s: list[float], values: list[float], edges_s: list[float]) -> list[tuple[float, float, float | None,
                                                                                            float | None, int]]:
    """(start s, end s, median, min, count) of `values` per bin of `edges_s` (half-open [start, end)); median and
    min are None in a bin without samples."""
    t, v = np.asarray(elapsed_s, dtype=np.float64), np.asarray(values, dtype=np.float64)
    out = []
    for lo, hi in zip(edges_s[:-1], edges_s[1:]):
        part = v[(t >= lo) & (t < hi)]
        out.append((lo, hi, float(np.median(part)) if part.size else None, float(part.min()) if part.size else None,
                    int(part.size)))
    return out
