"""Steps shared by the cold and warm worker phases."""
from __future__ import annotations

import os
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from bakeoff.harness.plan.cases import Case
from bakeoff.harness.supervise.gate import host_work

if TYPE_CHECKING:  # the orchestrator imports this module (mentions_oom): no torch here
    import torch

    from bakeoff.backends.base import Compiled


# How a failed allocation is worded: Python (MemoryError, which the host memory cap raises), CUDA and torch
# ("out of memory"), torch's CPU allocator ("DefaultCPUAllocator: can't allocate memory"), the C library
# ("Cannot allocate memory"), C++ (std::bad_alloc), ONNX Runtime/TensorRT ("OutOfMemory").
_OOM_WORDS = ("memoryerror", "out of memory", "outofmemory", "can't allocate memory", "cannot allocate memory",
              "bad_alloc")


def mentions_oom(text: str) -> bool:
    """Whether an error message or a worker's output tail reports a failed allocation."""
    low = text.lower()
    return any(w in low for w in _OOM_WORDS)


def _status_of(exc: BaseException) -> str:
    if isinstance(exc, MemoryError) or mentions_oom(f"{type(exc).__name__}: {exc}"):
        return "oom"
    return ""


def is_lazy_compile_error(exc: BaseException) -> bool:
    """Whether `exc` comes from torch.compile's compiler: it compiles lazily, inside the first run, and its
    failures there are still compile errors."""
    return type(exc).__module__.startswith(("torch._dynamo", "torch._inductor"))


def error_record(status: str, exc: BaseException) -> dict[str, Any]:
    """A record for an exception: `status` unless it was an out-of-memory error."""
    tb = traceback.format_exc(limit=8)
    if isinstance(exc, FirstRunError):  # the first run after a compile failed
        exc = exc.__cause__ or exc
        status = "compile_error" if is_lazy_compile_error(exc) else "runtime_error"
    return {"status": _status_of(exc) or status, "reason": f"{type(exc).__name__}: {exc}"[:2000],
            "traceback": tb[-4000:]}


def count_cache_files(env_names: tuple[str, ...]) -> int:
    """Files under the cache folders named by the environment variables `env_names`."""
    total = 0
    for name in env_names:
        folder = os.environ.get(name)
        if folder and Path(folder).is_dir():
            total += sum(1 for p in Path(folder).rglob("*") if p.is_file())
    return total


def limit_host_memory(case: Case) -> None:
    if case.memory_limit_gb and not case.device.startswith("cuda"):
        import resource

        limit = int(case.memory_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class FirstRunError(Exception):
    """The backend compiled but its first run failed; `__cause__` is the real error."""


@dataclass
class FirstResult:
    """A compiled executable after its first run: the run's raw output, the seconds from the compile's start
    to the first result and of the first run alone (prepare + run + sync), and, for the case's own compile
    (`compile`), the headline compile seconds (steps.compile_seconds) and the backend's cache files before
    and after."""

    compiled: Compiled
    prepared: Any
    raw: Any
    total_s: float
    first_run_s: float
    compile_s: float | None = None
    cache_files_before: int = 0
    cache_files_after: int = 0


def first_result(make: Callable[[], Compiled], inputs: list[torch.Tensor]) -> FirstResult:
    """`make()` (the compile, whose exception propagates as is), then prepare, one run and a sync (whose
    exception is wrapped in FirstRunError: error_record's lazy-compile rule decides its status)."""
    t0 = time.perf_counter()
    compiled = make()
    t1 = time.perf_counter()
    try:
        prepared = compiled.prepare(inputs)
        raw = compiled.run(prepared)
        compiled.sync()
    except Exception as exc:
        raise FirstRunError(f"{type(exc).__name__}: {exc}") from exc
    t2 = time.perf_counter()
    return FirstResult(compiled, prepared, raw, t2 - t0, t2 - t1)


def compile_and_first_run(backend, graph, specs, case: Case, inputs):
    """Compile, prepare and run once, synchronized. Returns (compiled, prepared, raw, seconds, total_seconds).

    `seconds` is the headline compile time: the sum of the backend's `info.compiler_stages` where it names
    them (IREE's iree-compile, ONNX Runtime's session creation, TensorRT's engine build: the compiler's own
    time, module load and first run apart), else the whole span compile() + prepare + first run + sync (eager,
    Inductor, which compiles lazily inside the first call, XLA, tritongen). `total_seconds` is always the
    whole span; where the headline is the compiler's stages, `info.stages_s["first_run"]`
    holds prepare + first run + sync.

    An exception from compile() propagates as is (a compile error); one from the first run is wrapped
    in FirstRunError (a runtime error), though lazy compilers (torch.compile) compile inside it.
    """
    # getattr: callers outside the worker pass case-like objects without `grad` (a forward)
    r = first_result(lambda: backend.compile_case(graph, specs, case.device, dict(case.options),
                                                  getattr(case, "grad", False)), inputs)
    return r.compiled, r.prepared, r.raw, compile_seconds(r.compiled, r.total_s, r.first_run_s), r.total_s


def compile_seconds(compiled, total_s: float, first_run_s: float) -> float:
    """The headline compile time of `compiled` (see compile_and_first_run)."""
    info = compiled.info
    named = [s for s in info.compiler_stages if s in info.stages_s]
    if not named:
        return total_s
    info.stages_s.setdefault("first_run", first_run_s)
    return sum(float(info.stages_s[s]) for s in named)


@contextmanager
def compiling(backend: Any, case: Case, graph: Any) -> Iterator[None]:
    """A compile step of `case` that compiles `graph` (the process warm-up's tiny graph, or the case's own with
    its first run): outside the device's gate under the `beside_compiles` policy when the backend's compile of
    that graph times nothing on the device (Backend.graph_compile_times_on_device) or the backend marks what it
    times (Backend.marks_device_work), so other cases may time meanwhile; inside it otherwise."""
    cls = type(backend)
    on_device = cls.graph_compile_times_on_device(graph, case.options, bool(getattr(case, "grad", False)))
    if on_device is not None and not cls.marks_device_work:
        yield
        return
    with host_work():  # what it marks as device work rejoins the gate (main.py installs Gate.device_work)
        yield
