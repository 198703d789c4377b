"""A compile step of the worker: compile then the first result (`first_result`, and the headline compile
seconds), the gate around it (`compiling`), and the files it writes to the backend's cache folders."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator

from bakeoff.harness.plan.cases import Case
from bakeoff.harness.supervise.gate import device_work, host_work, waited_so_far_s
from bakeoff.harness.worker.errors import FirstRunError

if TYPE_CHECKING:
    import torch

    from bakeoff.backends.base import Compiled


def count_cache_files(env_names: tuple[str, ...]) -> int:
    """Files under the cache folders named by the environment variables `env_names`."""
    total = 0
    for name in env_names:
        folder = os.environ.get(name)
        if folder and Path(folder).is_dir():
            total += sum(1 for p in Path(folder).rglob("*") if p.is_file())
    return total


@dataclass
class FirstResult:
    """A compiled executable after its first run: the run's raw output, the seconds from the compile's start
    to the first result and of the first run alone (prepare + run + sync), both less the seconds the worker
    waited for the device's gate meanwhile (`gate_wait_s`: a compile that times candidates on the device
    rejoins the gate for that part and may wait there while other cases time; the wait is the harness's, not
    the compiler's), and, for the case's own compile (stages.compile), the headline compile seconds
    (compile_seconds) and the backend's cache files before and after."""

    compiled: Compiled
    prepared: Any
    raw: Any
    total_s: float
    first_run_s: float
    gate_wait_s: float = 0.0
    compile_s: float | None = None
    cache_files_before: int = 0
    cache_files_after: int = 0


def first_result(make: Callable[[], Compiled], inputs: list[torch.Tensor]) -> FirstResult:
    """`make()` (the compile, whose exception propagates as is), then prepare, one run and a sync (whose
    exception is wrapped in FirstRunError: error_record's lazy-compile rule decides its status). The seconds
    leave out the worker's waits for the device's gate (FirstResult.gate_wait_s)."""
    w0, t0 = waited_so_far_s(), time.perf_counter()
    compiled = make()
    w1, t1 = waited_so_far_s(), time.perf_counter()
    try:
        with first_run_section(compiled):
            prepared = compiled.prepare(inputs)
            raw = compiled.run(prepared)
            compiled.sync()
    except Exception as exc:
        raise FirstRunError(f"{type(exc).__name__}: {exc}") from exc
    w2, t2 = waited_so_far_s(), time.perf_counter()
    return FirstResult(compiled, prepared, raw, (t2 - t0) - (w2 - w0), (t2 - t1) - (w2 - w1), w2 - w0)


def first_run_section(compiled: Compiled) -> ContextManager[Any]:
    """Where a compiled graph's first run goes: a compiler that finished inside compile() (it names its compiler
    stages: IREE, ONNX Runtime, TensorRT) leaves a first run that is device work alone, as long as one of its
    calls (IREE's float32 mlp_block: 1.1 s on the H200, which ran beside another case's timing and doubled it),
    so it rejoins the device's gate (`device_work`: it waits for a timing phase and holds the next one off);
    a lazy compiler's first run is its compile (eager, Inductor, XLA, tritongen) and stays where the compile is."""
    info = getattr(compiled, "info", None)
    return device_work() if info is not None and info.compiler_stages else nullcontext()


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
    r = first_result(lambda: backend.compile_case(graph, specs, case.device, case.options,
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
