"""The GPU's SM clock during a timing window, sampled by NVML in a background thread.

GEMMs timed in short bursts run at a boosted clock that a sustained load does not keep (on the H200 bakeoff's
GEMM figures were 3-9% faster than do_bench's 200 ms loop on the same call). The record keeps the clock seen
while its figures were taken, so a boosted window is visible, and compare can tell clock from code.
Clocks are read, never set.
"""
from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from bakeoff.harness.measure.environment import _nvml, _nvml_handle

SAMPLE_PERIOD_S = 0.005


class ClockSampler:
    """Samples the SM clock (MHz) of `device` every SAMPLE_PERIOD_S while entered; does nothing on the CPU or
    without NVML (then `fields()` says why). NVML calls release the GIL, so the timed thread is not held up
    for longer than a Python bytecode slice."""

    def __init__(self, device: str, period_s: float = SAMPLE_PERIOD_S) -> None:
        self.device, self.period_s = device, period_s
        self.samples_mhz: list[int] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: Any = None
        self._nv: Any = None

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
        self.samples_mhz.append(int(self._nv.nvmlDeviceGetClockInfo(self._handle, self._nv.NVML_CLOCK_SM)))

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._read()
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"[:300]
                return

    def fields(self) -> dict[str, Any]:
        """`sm_clock_mhz` (median), `sm_clock_mhz_min`, `sm_clock_mhz_max`, `sm_clock_samples`; on a GPU
        without a reading, `sm_clock_error`; on the CPU, nothing."""
        if not self.device.startswith("cuda"):
            return {}
        if not self.samples_mhz:
            return {"sm_clock_error": self.error or "no sample taken"}
        a = np.asarray(self.samples_mhz)
        out: dict[str, Any] = {"sm_clock_mhz": float(np.median(a)), "sm_clock_mhz_min": int(a.min()),
                               "sm_clock_mhz_max": int(a.max()), "sm_clock_samples": int(a.size)}
        if self.error:
            out["sm_clock_error"] = self.error
        return out


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
