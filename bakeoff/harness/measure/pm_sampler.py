"""The SM clock each profiled call ran at, read by the GPU's own performance monitors over the call's span.

The markers around a call read the clock before and after it, when a power-capped GPU has already recovered: on
the H200 they read 11-34% above the clock a compute-bound call ran at, which only the call's own `%clock64` shows
(benchmarks/kernel_clock_check.py). The PM sampler (CUPTI's PM Sampling API, through NVIDIA's cupti-python)
counts every SM's elapsed and active cycles every INTERVAL_NS while any kernel runs, touching none: here it runs
through the CUPTI pass, and a call's clock is the elapsed cycles over the nanoseconds of the samples that lie
wholly inside the call's span (its first kernel's start to its last kernel's end), for any backend's kernels.

The samples and the profiler's kernel records are stamped on different clocks (beside Kineto, CUPTI stamps the
samples in the host's TSC ticks; the kernel records come as microseconds from the trace's start): `fit_offset`
finds the one offset of the pass as where the SMs are busiest inside the calls' spans (a cross-correlation on
the samples' grid, then a fine search; on one target's calls alone where all of them together leave the SMs
idle, device_time.sampled_clocks), and a pass whose calls do not keep the SMs busy gets no clock from here.
Beside the stamps of a persistent matmul this read its clock within 0.5-1% per call (H100;
benchmarks/pm_clock_check.py).

Only one process holds a device's sampler at a time: it is enabled for one pass, inside the timing gate, and
disabled after it. Its records are decoded into a host image before that. The metrics are evaluated from the
image one sample at a time (cupti-python calls it expensive; decoding and evaluating took 18-26 us a sample on the
H200's host, three metrics: 0.4-0.9 s for a pass of 20k-35k samples), when `samples` is first read: the harness
reads them after it has released the gate. Without cupti-python, or where the sampler fails to start, the
markers' clock stands.
"""
from __future__ import annotations

import ctypes
import glob
import os
import statistics
import time
from typing import Any, Sequence

import numpy as np

# One interval for every pass. Each sample costs host time to decode (inside the timing gate) and evaluate (after
# it; kernel_clock_check.py times both), but a pass of long calls sampled coarser loses its markers (about 40 us):
# on synthetic passes of 20 ms calls sampled every 500 us the fit put the calls on the lead-in call before each,
# which only the markers tell apart.
INTERVAL_NS = 20_000
METRICS = ("sm__cycles_elapsed.avg", "sm__cycles_active.avg")
MIN_BUSY = 0.5  # the calls' spans must hold SMs at least this busy for the fit to stand
FINE_REACH_NS, FINE_STEP_NS = 40_000, 1_000
HOST_INIT_BYTES_13_0 = 48  # CUpti_Profiler_Host_Initialize_Params of libcupti 13.0, before the set name
ENV_OFF = "BAKEOFF_PM_SAMPLER"  # "0": leave the sampler off

Sample = tuple[float, float, float, float]  # start ns, end ns, SM elapsed cycles, SM active cycles (SM average)
_STATE: dict[str, Any] = {}  # per process: the loaded libraries, the refusal reason


def unavailable() -> str | None:
    """Why this process cannot sample (the package, its libraries, a switch), or None."""
    if os.environ.get(ENV_OFF, "1") == "0":
        return f"{ENV_OFF}=0"
    if "why" not in _STATE:
        _STATE["why"] = _load()
    return _STATE["why"]


def _load() -> str | None:
    try:
        import cupti  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any failure means no sampler, and says why
        return f"cupti-python is not installed (pip install 'bakeoff[cuda]'): {exc}"[:300]
    here = _cupti_dir()
    for lib in ("libnvperf_host.so", "libnvperf_target.so"):  # libcupti dlopens them: load the ones beside it
        found = [os.path.join(here, lib)] if here and os.path.exists(os.path.join(here, lib)) else sorted(
            glob.glob(os.path.join(_nvidia_dir(), "**", lib), recursive=True))
        try:
            if found:
                ctypes.CDLL(found[-1], mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            return f"{lib} did not load: {exc}"[:300]
    return None


def _cupti_dir() -> str | None:
    """The folder of the libcupti this process uses (torch's, once torch has loaded it), where cuda-pathfinder
    (which cupti-python loads it with) can tell."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return os.path.dirname(load_nvidia_dynamic_lib("cupti").abs_path or "") or None
    except Exception:  # noqa: BLE001 - then the wheels' folders are searched
        return None


def _nvidia_dir() -> str:
    try:
        import nvidia

        return list(nvidia.__path__)[0]
    except Exception:  # noqa: BLE001 - no wheel-installed CUDA libraries: the loader's path only
        return "/nonexistent"


class Sampling:
    """One pass of the sampler on `device_index`: `with Sampling(0) as pm: ...`, then `pm.samples` (in_ns) or
    `pm.error` (why there are none). The samples are decoded when the pass ends and evaluated when first read.
    Never raises for the sampler's sake: the pass it wraps must stand."""

    def __init__(self, device_index: int) -> None:
        self.device_index = device_index
        self._samples: list[Sample] | None = None
        self._error = unavailable()
        self._col: Any = None
        self._data: Any = None  # the decoded host image, until it is evaluated
        self._t0 = 0.0

    def __enter__(self) -> "Sampling":
        if self._error is None:
            try:
                self._col = collector(self.device_index)
                self._col.start()
                self._t0 = time.perf_counter()
            except Exception as exc:  # noqa: BLE001
                self._error = f"the PM sampler did not start: {type(exc).__name__}: {exc}"[:300]
                self._close()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._col is None:
            return
        try:
            self._col.stop()
            most = int((time.perf_counter() - self._t0) * 1e9 / INTERVAL_NS * 1.25) + 1024
            self._data = self._col.decode(max_samples=most)
        except Exception as exc:  # noqa: BLE001
            self._error = f"the PM sampler's samples did not decode: {type(exc).__name__}: {exc}"[:300]
        finally:
            self._close()

    @property
    def samples(self) -> list[Sample]:
        """The pass's samples on a nanosecond scale (in_ns); [] where there are none (then `error` says why)."""
        self._evaluate()
        return self._samples or []

    @property
    def error(self) -> str | None:
        """Why the pass has no samples, or None."""
        self._evaluate()
        return self._error

    def _evaluate(self) -> None:
        if self._samples is not None or self._error is not None:
            return
        if self._data is None:  # entered and left without a collector: nothing was sampled
            self._error = "the PM sampler gave no samples"
            return
        try:
            self._samples = in_ns(values(self._data))
            if not self._samples:
                self._error = "the PM sampler gave no samples"
        except Exception as exc:  # noqa: BLE001
            self._error = f"the PM sampler's samples did not evaluate: {type(exc).__name__}: {exc}"[:300]
        finally:
            self._data = None

    def _close(self) -> None:
        try:
            if self._col is not None:
                self._col.disable()
        except Exception:  # noqa: BLE001 - already broken: the error above says so
            pass
        self._col = None


def collector(device_index: int, metrics: Sequence[str] = METRICS) -> Any:
    """An enabled PM sampling collector for `metrics` every INTERVAL_NS. libcupti 13.0 (the GPU image's) refuses
    the profiler-host init struct of cupti-python 13.4 by its size; the size it knows is passed instead."""
    import cupti.cupti as cc
    import cupti.profiler_host as ph
    from cupti import pm_sampling

    col = pm_sampling.Collector(device_index=device_index)
    col.enable()
    try:
        if not _STATE.get("host_ok"):
            try:
                ph.ProfilerHost(col._chip_name, ph.ProfilerType.PM_SAMPLING).initialize()
            except cc.cuptiError as exc:
                if exc.status != cc.Result.ERROR_INVALID_PARAMETER:
                    raise
                cc.PROFILER_HOST_INITIALIZE_PARAMS_STRUCT_SIZE = HOST_INIT_BYTES_13_0
            _STATE["host_ok"] = True
        col.configure(metrics=list(metrics), sampling_interval=INTERVAL_NS,
                      trigger_mode=pm_sampling.TriggerMode.GPU_TIME_INTERVAL)
    except Exception:
        col.disable()
        raise
    return col


def decoded(col: Any, metrics: Sequence[str] = METRICS, max_samples: int = 1_000_000) -> list[tuple[float, ...]]:
    """The samples since the collector's start, decoded and evaluated (values). `max_samples` sizes the decode's
    host image, which is allocated and initialized for that many samples."""
    return values(col.decode(max_samples=max_samples), metrics)


def values(data: Any, metrics: Sequence[str] = METRICS) -> list[tuple[float, ...]]:
    """The samples of a decoded image as stamped: (start, end, one value per metric, in `metrics`' order),
    evaluated on the host one sample at a time; needs no device and no collector."""
    at = [list(data.metrics).index(m) for m in metrics]  # the values come in the decoder's metric order
    return [(s.start_timestamp, s.end_timestamp, *(float(s.metric_values[i]) for i in at)) for s in data]


def in_ns(raw: Sequence[tuple[float, ...]]) -> list[Sample]:
    """The samples on a nanosecond scale, sorted (to_ns)."""
    return to_ns(raw)[0]


def to_ns(raw: Sequence[tuple[float, ...]]) -> tuple[list[tuple[float, ...]], float]:
    """The samples on a nanosecond scale, sorted, with their values as they came, and the ticks per ns they were
    stamped in: a profiler that registers its own CUPTI timestamp (Kineto: the host's TSC) has the sampler stamp
    in that clock's ticks, so a sample INTERVAL_NS long spans interval x ticks per ns. Samples stamped 0 (none
    taken) and those not one interval long (the first after a pause spans the pause) are left out."""
    got = sorted(x for x in raw if x[0] > 0 and x[1] > x[0])
    if not got:
        return [], 1.0
    typical = statistics.median(x[1] - x[0] for x in got)
    got = [x for x in got if abs((x[1] - x[0]) / typical - 1) < 0.5]
    ticks = statistics.fmean(x[1] - x[0] for x in got)  # a tick's rounding, alternate ways, averages out
    per_ns = 1.0 if abs(ticks / INTERVAL_NS - 1) < 0.01 else ticks / INTERVAL_NS
    return [(x[0] / per_ns, x[1] / per_ns, *x[2:]) for x in got], per_ns


def busy_at(windows_ns: Sequence[tuple[float, float]], samples: Sequence[Sample] | np.ndarray, shift_ns: float,
            whole: bool = True) -> tuple[float | None, int]:
    """Active over elapsed SM cycles of the samples inside the windows moved by shift_ns (wholly inside, or
    touching them where not `whole`), and how many samples that was."""
    if not len(samples) or not windows_ns:
        return None, 0
    arr = samples if isinstance(samples, np.ndarray) else np.array(samples, dtype=np.float64)
    ok = _inside(windows_ns, arr, shift_ns, whole)
    sm = arr[ok, 2].sum()
    return (float(arr[ok, 3].sum() / sm) if sm > 0 else None), int(ok.sum())


def samples_inside(windows_ns: Sequence[tuple[float, float]], samples: Sequence[tuple[float, ...]],
                   shift_ns: float = 0.0) -> int:
    """How many samples lie wholly inside one of the windows moved by shift_ns."""
    if not len(samples) or not windows_ns:
        return 0
    return int(_inside(windows_ns, np.array(samples, dtype=np.float64), shift_ns, True).sum())


def _inside(windows_ns: Sequence[tuple[float, float]], arr: np.ndarray, shift_ns: float, whole: bool) -> np.ndarray:
    """Which samples (rows of arr: start, end, ...) lie wholly inside a window moved by shift_ns, or touch one."""
    ws = np.array(sorted(windows_ns), dtype=np.float64) + shift_ns
    if whole:
        at = np.searchsorted(ws[:, 0], arr[:, 0], side="right") - 1
        return (at >= 0) & (arr[:, 1] <= ws[np.clip(at, 0, None), 1])
    at = np.searchsorted(ws[:, 0], arr[:, 1], side="left") - 1
    return (at >= 0) & (arr[:, 0] < ws[np.clip(at, 0, None), 1])


def fit_offset(windows_ns: Sequence[tuple[float, float]], samples: Sequence[Sample],
               quiet_ns: Sequence[tuple[float, float]] = ()) -> tuple[float | None, float]:
    """The shift (ns) that puts the calls' windows on the samples' clock, and the SMs' busy share inside them
    there; (None, busy) where that share is under MIN_BUSY. The score of a shift: the share of active cycles in
    the samples wholly inside the calls' windows, less the share in those touching the `quiet_ns` windows (the
    markers: one SM of all busy), which keeps the calls from fitting onto their own lead-in calls. Coarse: every
    lag of the samples' grid that puts all the windows on samples (FFT cross-correlations); fine:
    +-FINE_REACH_NS around the best, the middle of the shifts within 0.1% of the best."""
    if not samples or not windows_ns:
        return None, 0.0
    arr = np.array(samples, dtype=np.float64)
    t0, n = arr[0, 0], int((arr[-1, 1] - arr[0, 0]) // INTERVAL_NS) + 1
    grid = np.clip(((arr[:, 0] - t0) // INTERVAL_NS).astype(np.int64), 0, n - 1)
    sm, act, got = np.zeros(n), np.zeros(n), np.zeros(n)
    sm[grid], act[grid], got[grid] = arr[:, 2], arr[:, 3], 1.0
    w0 = min(a for a, _ in windows_ns)
    ind = _bins(windows_ns, w0, True)
    (num, den, cnt) = _lagged((act, sm, got), ind)
    score = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    if quiet_ns:
        qn, qd = _lagged((act, sm), _bins(quiet_ns, w0, False))
        score = score - np.where(qd > 0, qn / np.where(qd > 0, qd, 1), 0.0)
    # every window on samples: a pass repeats itself, and a lag of whole calls would fit as well but for the ends
    lags = np.flatnonzero(cnt >= cnt.max() - max(0.005 * ind.sum(), 0.5)) if ind.sum() else []
    if not len(lags):
        return None, 0.0
    coarse = t0 + int(lags[np.argmax(score[lags])]) * INTERVAL_NS - w0

    def fine_score(k: int) -> float:
        calls = busy_at(windows_ns, arr, coarse + k)[0] or 0.0
        return calls - ((busy_at(quiet_ns, arr, coarse + k, whole=False)[0] or 0.0) if quiet_ns else 0.0)

    fine = [(k, fine_score(k)) for k in range(-FINE_REACH_NS, FINE_REACH_NS + 1, FINE_STEP_NS)]
    top = max(b for _, b in fine)
    best = [k for k, b in fine if b >= top - 1e-3]
    shift = coarse + best[len(best) // 2]
    busy = busy_at(windows_ns, arr, shift)[0] or 0.0
    return (shift if busy >= MIN_BUSY else None), busy


def _bins(windows_ns: Sequence[tuple[float, float]], w0: float, whole: bool) -> np.ndarray:
    """1 in the grid bins (INTERVAL_NS from w0) wholly inside a window (`whole`) or touching one."""
    ind = np.zeros(int((max(b for _, b in windows_ns) - w0) // INTERVAL_NS) + 2)
    for a, b in windows_ns:
        lo = np.ceil((a - w0) / INTERVAL_NS) if whole else np.floor((a - w0) / INTERVAL_NS)
        hi = np.floor((b - w0) / INTERVAL_NS) if whole else np.ceil((b - w0) / INTERVAL_NS)
        ind[max(int(lo), 0):max(int(hi), 0)] = 1.0
    return ind


def _lagged(series: Sequence[np.ndarray], ind: np.ndarray) -> list[np.ndarray]:
    """For every lag L on the grid, per series: its sum over the bins the windows cover when they start at bin L
    (cross-correlations by FFT)."""
    n = len(series[0])
    size = 1 << int(np.ceil(np.log2(n + len(ind))))
    f_ind = np.conj(np.fft.rfft(ind, size))
    return [np.fft.irfft(np.fft.rfft(x, size) * f_ind, size)[:n] for x in series]


def call_clocks(windows_ns: Sequence[tuple[float, float]], samples: Sequence[tuple[float, ...]], shift_ns: float,
                column: int = 2) -> list[float | None]:
    """Per window (moved by shift_ns), the clock in MHz over the samples (sorted, as in_ns gives them) wholly
    inside it: their cycles (the SM elapsed cycles, or the value in `column`) over their nanoseconds; None for a
    window with no sample wholly inside (a call under two intervals)."""
    if not len(samples):
        return [None] * len(windows_ns)
    arr = np.array(samples, dtype=np.float64)
    out: list[float | None] = []
    for a, b in windows_ns:
        lo = np.searchsorted(arr[:, 0], a + shift_ns, side="left")
        hi = np.searchsorted(arr[:, 1], b + shift_ns, side="right")
        ns = (arr[lo:hi, 1] - arr[lo:hi, 0]).sum() if hi > lo else 0.0
        out.append(float(arr[lo:hi, column].sum() / ns * 1e3) if ns > 0 else None)
    return out
