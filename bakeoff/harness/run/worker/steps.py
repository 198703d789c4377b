"""Steps shared by the cold and warm worker phases."""
from __future__ import annotations

import os
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from bakeoff.harness.plan.cases import Case


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


def error_record(status: str, exc: BaseException) -> dict[str, Any]:
    """A record for an exception: `status` unless it was an out-of-memory error."""
    tb = traceback.format_exc(limit=8)
    if isinstance(exc, FirstRunError):
        exc = exc.__cause__ or exc
        # torch.compile compiles lazily, inside the first run: its failures are still compile errors.
        lazy_compile = type(exc).__module__.startswith(("torch._dynamo", "torch._inductor"))
        status = "compile_error" if lazy_compile else "runtime_error"
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
    t0 = time.perf_counter()
    # getattr: callers outside the worker pass case-like objects without `grad` (a forward)
    compiled = backend.compile_case(graph, specs, case.device, dict(case.options), getattr(case, "grad", False))
    t1 = time.perf_counter()
    try:
        prepared = compiled.prepare(inputs)
        raw = compiled.run(prepared)
        compiled.sync()
    except Exception as exc:
        raise FirstRunError(f"{type(exc).__name__}: {exc}") from exc
    t2 = time.perf_counter()
    return compiled, prepared, raw, compile_seconds(compiled, t2 - t0, t2 - t1), t2 - t0


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
    from bakeoff.harness.run.gate import host_work

    cls = type(backend)
    on_device = cls.graph_compile_times_on_device(graph, case.options, bool(getattr(case, "grad", False)))
    if on_device is not None and not cls.marks_device_work:
        yield
        return
    with host_work():  # what it marks as device work rejoins the gate (main.py installs Gate.device_work)
        yield
