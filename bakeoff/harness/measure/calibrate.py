"""Measure the device's ceilings: copy bandwidth (GB/s, read + write counted) and matmul TFLOP/s per dtype.

A ceiling is the best of several kernels and shapes, so that no workload's GEMM can beat it because the one
kernel measured happened to be a weak one: for matmul, torch.mm at a few square and rectangular shapes in
three layouts (NN, NT, TN), the same through cuBLASLt (torch's preferred BLAS library switched for the call),
and a Triton matmul (bakeoff's own tritongen, autotuned) where Triton runs; for copies, two sizes. Each is
timed with the same timer as every case (harness.measure.timing.measure), on random data, never zeros, with
the SM clock sampled during it. The method string names the winner and every candidate's figure. The
datasheet's peaks (measure.spec_peaks) are returned beside them where the GPU is known.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from bakeoff.harness.measure.clocks import ClockSampler
from bakeoff.harness.measure.spec_peaks import spec_ceilings
from bakeoff.harness.measure.timing import TimedCall, measure
from bakeoff.workloads.lower_torch import TORCH_DTYPES
from bakeoff.backends import get_backend
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import bind

# Copies several times the last-level cache; matmuls big enough to fill the device, (M, K, N).
COPY_BYTES = {"cuda": (2**30, 2**28), "cpu": (2**28,)}
MATMUL_SHAPES = {"cuda": ((8192, 8192, 8192), (4096, 4096, 4096), (16384, 8192, 8192), (8192, 16384, 8192)),
                 "cpu": ((1024, 1024, 1024), (2048, 512, 2048))}
LAYOUTS = ("NN", "NT", "TN")


@dataclass(frozen=True)
class Candidate:
    """One way to reach a ceiling: a label, the call, and the work it does (FLOPs or bytes moved)."""

    label: str
    call: Callable[[], object]
    work: float


def _time_ms(call: Callable[[], object], device: str, budget_s: float) -> tuple[float, str]:
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    target = TimedCall("ceiling", call, sync, events=device.startswith("cuda"))
    with ClockSampler(device) as clock:
        stats = measure([target], device, warmup_s=min(0.5, budget_s), budget_s=budget_s, min_reps=5,
                        max_reps=1000, target_iqr=0.02, flush_l2=False)["ceiling"]
    clocks = clock.fields()
    sm = (f", SM clock {clocks['sm_clock_mhz']:.0f} MHz ({clocks['sm_clock_mhz_min']}-{clocks['sm_clock_mhz_max']})"
          if "sm_clock_mhz" in clocks else "")
    return stats.median_ms, f"{stats.method}, median of {stats.n}, IQR/median {stats.iqr_rel:.3f}{sm}"


def _random(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.randn(shape, device=device, dtype=torch.float32).to(dtype)


def _operands(m: int, k: int, n: int, layout: str, dtype: torch.dtype, device: str):
    """a (m x k) and b (k x n) stored so that the call reads them in `layout` (T: a transposed view)."""
    a = _random((k, m), dtype, device).t() if layout[0] == "T" else _random((m, k), dtype, device)
    b = _random((n, k), dtype, device).t() if layout[1] == "T" else _random((k, n), dtype, device)
    return a, b


def _cublaslt(call: Callable[[], object]) -> Callable[[], object]:
    """`call` with torch's preferred BLAS library set to cuBLASLt for its duration."""
    def run() -> object:
        before = torch.backends.cuda.preferred_blas_library()
        torch.backends.cuda.preferred_blas_library("cublaslt")
        try:
            return call()
        finally:
            torch.backends.cuda.preferred_blas_library(before)
    return run


def matmul_candidates(device: str, dtype: str) -> Iterator[Candidate]:
    """torch.mm at every shape and layout (and through cuBLASLt on CUDA), then tritongen's matmul on CUDA."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    tdtype = TORCH_DTYPES[dtype]
    for m, k, n in MATMUL_SHAPES[kind]:
        for layout in LAYOUTS:
            a, b = _operands(m, k, n, layout, tdtype, device)
            c = torch.empty(m, n, device=device, dtype=tdtype)
            mm = (lambda a=a, b=b, c=c: torch.mm(a, b, out=c))
            libraries = [("cuBLAS" if kind == "cuda" else "CPU BLAS", mm)]
            if kind == "cuda" and hasattr(torch.backends.cuda, "preferred_blas_library"):
                libraries.append(("cuBLASLt", _cublaslt(mm)))
            for lib, call in libraries:
                yield Candidate(f"torch.mm {lib} {m}x{k}x{n} {layout}", call, 2.0 * m * n * k)
            del a, b, c
    if kind == "cuda":
        yield from _triton_matmul(device, dtype)


def _triton_matmul(device: str, dtype: str) -> Iterator[Candidate]:
    """tritongen's autotuned Triton matmul at the first CUDA shape (nothing when Triton is absent)."""
    backend = get_backend("tritongen")
    if backend.available() is not None:
        return
    m, k, n = MATMUL_SHAPES["cuda"][0]
    b = GraphBuilder("calibrate_matmul")
    graph = bind(b.finish([b.matmul(b.input("a", ("M", "K")), b.input("b", ("K", "N")))]),
                 {"M": m, "K": k, "N": n}, dtype)
    with tempfile.TemporaryDirectory(prefix="bakeoff-calibrate-") as tmp:
        old = os.environ.get("BAKEOFF_TRITONGEN_CACHE_DIR")
        os.environ["BAKEOFF_TRITONGEN_CACHE_DIR"] = tmp  # its tuning results stay out of the user's cache
        try:
            compiled = backend.compile(graph, [], device, backend.Options())
            prepared = compiled.prepare(make_inputs(graph, 0, device))
        finally:
            if old is None:
                os.environ.pop("BAKEOFF_TRITONGEN_CACHE_DIR", None)
            else:
                os.environ["BAKEOFF_TRITONGEN_CACHE_DIR"] = old
        yield Candidate(f"Triton (tritongen) {m}x{k}x{n} NN", lambda: compiled.run(prepared), 2.0 * m * n * k)


def best_of(candidates: Iterator[Candidate], device: str, budget_s: float, scale: float
            ) -> tuple[float, str] | None:
    """(best rate, method) over `candidates`, rate = work / seconds * `scale`; a candidate that fails is named
    in the method with its error. None when none ran."""
    rates: list[tuple[float, str, str]] = []
    failures: list[str] = []
    it = iter(candidates)
    while True:
        try:
            cand = next(it)
        except StopIteration:
            break
        except Exception as exc:  # building a candidate (e.g. Triton's compile) failed: named, not fatal
            failures.append(f"{type(exc).__name__}: {exc}"[:200])
            break
        try:
            ms, how = _time_ms(cand.call, device, budget_s)
        except Exception as exc:
            failures.append(f"{cand.label}: {type(exc).__name__}: {exc}"[:200])
            continue
        rates.append((cand.work / (ms * 1e-3) * scale, cand.label, how))
    if not rates:
        return None
    rate, label, how = max(rates)
    others = "; ".join(f"{lbl} {r:.4g}" for r, lbl, _ in sorted(rates, reverse=True)[1:])
    method = f"best of {len(rates)}: {label} ({how})" + (f"; others: {others}" if others else "")
    return rate, method + (f"; failed: {'; '.join(failures)}" if failures else "")


def _copy_candidates(device: str) -> Iterator[Candidate]:
    kind = "cuda" if device.startswith("cuda") else "cpu"
    for nbytes in COPY_BYTES[kind]:
        src = _random((nbytes // 2,), torch.bfloat16, device)
        dst = torch.empty_like(src)
        yield Candidate(f"device copy of {nbytes / 2**20:.0f} MiB bf16", lambda s=src, d=dst: d.copy_(s), 2.0 * nbytes)
        del src, dst


# Each candidate's timing budget in seconds (after a warm-up of up to half a second).
BUDGET_S = {"cuda": 1.0, "cpu": 0.3}


def measure_ceilings(device: str, dtypes: list[str],
                     budget_s: float | None = None) -> list[tuple[str, float, str, str]]:
    """[(name, value, unit, method)]: copy_gbps (read + write counted) and matmul_tflops_<dtype> for each dtype,
    each the best of its candidates; then the datasheet's spec_copy_gbps and spec_matmul_tflops_<dtype> where
    the GPU is in measure.spec_peaks. `budget_s` is each candidate's timing budget (default BUDGET_S)."""
    budget_s = budget_s or BUDGET_S["cuda" if device.startswith("cuda") else "cpu"]
    out = []
    copy = best_of(_copy_candidates(device), device, budget_s, 1e-9)
    if copy is not None:
        out.append(("copy_gbps", copy[0], "GB/s", f"read + write counted; {copy[1]}"))
    for dtype in dtypes:
        got = best_of(matmul_candidates(device, dtype), device, budget_s, 1e-12)
        if got is not None:
            out.append((f"matmul_tflops_{dtype}", got[0], "TFLOP/s", got[1]))
    if device.startswith("cuda"):
        out += spec_ceilings(torch.cuda.get_device_name(torch.device(device)), dtypes)
    return out
