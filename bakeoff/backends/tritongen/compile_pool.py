"""Compile Triton kernels in worker processes: the config search's candidates side by side, each on its own core.

Triton holds the GIL in parts of its pipeline, so threads compiling candidates overlap only partly; processes do
not share it. The parent never compiles: it runs the same `fn.warmup(...)` calls that a compile in place would,
with Triton's `knobs.runtime.jit_cache_hook` set to a hook that records what the JIT would compile (the
specialization: signature, constexprs, attributes, options) and answers "done", so the JIT skips the compile
(`capture`). A worker rebuilds `ASTSource(fn, signature, constexprs, attrs)` from the generated module's file and
calls `triton.compile` for the parent's target, which writes Triton's on-disk cache under the cache key the JIT
computes (same source, specialization, options, target and TRITON_* environment). The parent's ordinary warmup
that follows finds the kernel there: a cache hit, which loads in milliseconds.

The pool starts on the first search that compiles candidates; in the harness that is the process's warm-up on
the tiny graph, so its start is recorded as process setup (`compile_process_setup_s`), apart from the case's
compile. Workers are spawned (never forked: the parent holds a CUDA context) and need no device: Triton
compiles for a `GPUTarget` without one (offline.py). Each worker exits when the process that started it is gone.
As multiprocessing's spawn does, a worker first imports the parent's `__main__` module (the harness's worker
entry is light and guarded); a script that starts compiles outside an `if __name__ == "__main__":` guard makes
the workers fail to start, and its candidates compile in threads (the notes say why).
BAKEOFF_TRITONGEN_COMPILE_WORKERS sets the pool's size; 0 (the default) turns it off: candidates compile in
threads. Measured on the H200 with `--jobs 8` (configs/h200_tritongen_dtypes.yaml, 33 tritongen cases), four
workers per case made the cold compile slower, not faster: 31 of 33 cases, e.g. 0.70 -> 1.68 s for a pointwise
chain, 3.2 -> 4.2 s for bf16 attention, 9.4 -> 12.4 s for the fp32 MLP block, with process setup a median 1.5 s longer
(eight cases' pools, 32 compiling processes, on 16 cores; each search pays a round trip and the cache loads).
With one case at a time (`--jobs 1`, 16 cores, an H100 host) it was slower too, in 9 of 10 tensor-core cases (e.g.
attn_block bf16 2.98 -> 6.92 s, gemm_bias_gelu bf16 1.70 -> 2.02 s; fp32 attention 2.09 -> 1.74 s the one faster),
so it stays off by default at any `--jobs` (the evidence: docs/EVIDENCE.md, "the compile pool with one case at a time").
"""
from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Sequence

WORKERS_ENV = "BAKEOFF_TRITONGEN_COMPILE_WORKERS"
# Off by default (the module docstring says why); a size set by the environment is capped by the usable cores.
DEFAULT_WORKERS = 0
START_TIMEOUT_S = 180.0  # spawning the workers and importing Triton's compiler in each
CANDIDATE_TIMEOUT_S = 300.0  # one kernel's compile in a worker; a batch gets this per round of the pool


class PoolUnavailable(RuntimeError):
    """The pool cannot compile here (turned off, no driver target, a Triton without the hook, a failed start)."""


@dataclass(frozen=True)
class CompileJob:
    """One kernel specialization as Triton's JIT would compile it, in a form a worker process can rebuild."""

    module_name: str   # the generated module, imported by the worker from `module_path` under this name
    module_path: str
    fn_name: str
    signature: dict[str, Any]
    constexprs: dict[tuple, Any]
    attrs: dict[tuple, Any]
    options: dict[str, Any]  # the JIT's options, as Triton's own preload reads them back
    target: Any              # triton.backends.compiler.GPUTarget
    env: dict[str, str]      # the parent's TRITON_* variables: they feed the cache key
    source_class: Any = None  # the JIT's own ASTSource class (Gluon kernels: GluonASTSource); None: ASTSource

    def identity(self) -> tuple:
        return self.module_name, self.fn_name, repr(sorted(self.constexprs.items())), repr(self.signature), \
            repr(self.attrs), repr(sorted(self.options.items())), repr(self.target)


def pool_size() -> int:
    """Workers to start: BAKEOFF_TRITONGEN_COMPILE_WORKERS, else DEFAULT_WORKERS, never more than usable cores."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    try:
        wanted = int(raw) if raw else DEFAULT_WORKERS
    except ValueError:
        raise PoolUnavailable(f"{WORKERS_ENV}={raw!r} is not a whole number") from None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(0, min(wanted, cores))


def _options_from_json(options: dict[str, Any]) -> dict[str, Any]:
    """Options as `JITFunction.preload` decodes them from the hook's specialization data (lists back to tuples)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}


def capture(calls: Sequence[Callable[[], Any]], target: Any) -> list[list[CompileJob] | Exception]:
    """Run each of `calls` (warmups of `@triton.jit` functions) with the JIT's compile replaced by a record of it:
    per call, the kernels it would have compiled (none when the JIT holds them already), or what it raised."""
    import json

    from triton import knobs

    recorded: list[CompileJob] = []
    env = {k: v for k, v in os.environ.items() if k.startswith("TRITON_")}

    def hook(*, fn: Any, compile: dict[str, Any], **_: Any) -> bool:
        py_fn = fn.jit_function.fn
        data = json.loads(compile["specialization_data"])
        recorded.append(CompileJob(py_fn.__module__, sys.modules[py_fn.__module__].__file__, py_fn.__name__,
                                   dict(compile["signature"]), dict(compile["constants"]),
                                   dict(compile["configs"][0]), _options_from_json(data["options"]), target, env,
                                   getattr(fn.jit_function, "ASTSource", None)))
        return True  # the JIT then skips its compile

    out: list[list[CompileJob] | Exception] = []
    before = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = hook
    try:
        for call in calls:
            recorded = []
            try:
                call()
                out.append(recorded)
            except Exception as exc:  # noqa: BLE001 - the candidate's own error (bad arguments), said by the caller
                out.append(exc)
    finally:
        knobs.runtime.jit_cache_hook = before
    return out


def compile_job(job: CompileJob) -> tuple[str | None, str | None]:
    """In a worker: compile `job` into Triton's cache; (the kernel's cache hash, None) or (None, the error)."""
    try:
        _use_env(job.env)
        import triton
        from triton.compiler import ASTSource

        fn = getattr(_module(job.module_name, job.module_path), job.fn_name)
        src = (job.source_class or ASTSource)(fn, job.signature, job.constexprs, job.attrs)
        return triton.compile(src, target=job.target, options=job.options).hash, None
    except Exception as exc:  # noqa: BLE001 - sent back in words: a compiler's exception may not pickle
        return None, f"{type(exc).__name__}: {str(exc).strip()[:300]}"


def _use_env(env: dict[str, str]) -> None:
    """Make this worker's TRITON_* variables the parent's (Triton's knobs read them when compiling)."""
    for name in [k for k in os.environ if k.startswith("TRITON_") and k not in env]:
        del os.environ[name]
    os.environ.update(env)


def _module(name: str, path: str) -> Any:
    """The generated module `name` from `path`, imported once per worker (as tune.load_kernels imports it)."""
    import importlib.util

    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == path:
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _worker_init(parent_pid: int) -> None:
    """A worker's start: exit when the parent is gone (a killed case leaves no compile worker behind)."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="compile-pool-parent-watch", daemon=True).start()


def _ready() -> int:
    """A warm-up task: import Triton's compiler and its CUDA backend now, so that the first job does not."""
    import triton.compiler  # noqa: F401
    from triton.backends import backends

    backends.get("nvidia")
    return os.getpid()


_pool: ProcessPoolExecutor | None = None
_size = 0  # the started pool's workers
_lock = threading.Lock()


def pool() -> ProcessPoolExecutor:
    """This process's compile pool, started with every worker ready on first use; raises PoolUnavailable."""
    global _pool, _size
    with _lock:
        if _pool is not None:
            return _pool
        size = pool_size()
        if size < 1:
            raise PoolUnavailable(f"{WORKERS_ENV}={os.environ.get(WORKERS_ENV, '').strip() or 'unset'} (the "
                                  "default: measured slower beside other cases)")
        import multiprocessing

        executor = ProcessPoolExecutor(size, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_worker_init, initargs=(os.getpid(),))
        try:
            ready = [executor.submit(_ready) for _ in range(size)]  # spawns all `size` workers now
            done, late = wait(ready, timeout=START_TIMEOUT_S)
            if late:
                raise TimeoutError(f"workers not ready after {START_TIMEOUT_S:.0f} s")
            for f in done:
                f.result()
        except Exception as exc:
            _stop(executor)
            why = " ".join(str(exc).split())[:200]
            raise PoolUnavailable(f"the compile workers did not start ({type(exc).__name__}: {why})") from exc
        _pool, _size = executor, size
        return executor


def shutdown() -> None:
    """Stop the pool's workers now (at exit, after a timeout or a dead worker); the next use starts a fresh pool."""
    global _pool
    with _lock:
        executor, _pool = _pool, None
    if executor is not None:
        _stop(executor)


def _stop(executor: ProcessPoolExecutor) -> None:
    """Cancel what is queued and end the workers, a compile in progress included (terminate, then join)."""
    terminate = getattr(executor, "terminate_workers", None)  # Python 3.14
    if terminate is not None:
        terminate()
        return
    procs = list((getattr(executor, "_processes", None) or {}).values())  # shutdown() forgets them
    executor.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.join(5)


atexit.register(shutdown)


def worker_pids() -> list[int]:
    """The pids of the pool's live workers (none when it is not started)."""
    procs = getattr(_pool, "_processes", None) or {}
    return [p.pid for p in procs.values() if p.is_alive()]


def compile_all(jobs: Sequence[CompileJob]) -> dict[tuple, str | None]:
    """Compile `jobs` in the pool, each identity once; per identity None (built) or the error in words. Waits at
    most CANDIDATE_TIMEOUT_S per round of the pool; jobs not done by then are errors and the pool is stopped."""
    from concurrent.futures.process import BrokenProcessPool

    executor = pool()
    unique = {job.identity(): job for job in jobs}
    futures: dict[tuple, Future] = {key: executor.submit(compile_job, job) for key, job in unique.items()}
    limit_s = CANDIDATE_TIMEOUT_S * max(1, math.ceil(len(futures) / max(1, _size)))
    _, late = wait(futures.values(), timeout=limit_s)
    out: dict[tuple, str | None] = {}
    broken = bool(late)
    for key, future in futures.items():
        if future in late:
            out[key] = f"TimeoutError: not compiled within {limit_s:.0f} s in a compile worker"
            continue
        try:
            out[key] = future.result()[1]
        except BrokenProcessPool as exc:  # the compiler took its worker down
            broken = True
            out[key] = f"BrokenProcessPool: the compile worker died ({exc})"
        except Exception as exc:  # noqa: BLE001 - e.g. a job that did not pickle
            out[key] = f"{type(exc).__name__}: {str(exc)[:200]}"
    if broken:
        shutdown()
    return out


def _target() -> Any:
    """The target Triton's JIT compiles for here (its active driver's), or PoolUnavailable."""
    from triton import knobs
    from triton.runtime.driver import driver

    if not hasattr(knobs.runtime, "jit_cache_hook"):
        raise PoolUnavailable("this Triton has no knobs.runtime.jit_cache_hook")
    try:
        return driver.active.get_current_target()
    except Exception as exc:  # noqa: BLE001 - no GPU driver: nothing to compile for
        raise PoolUnavailable(f"no GPU target ({type(exc).__name__}: {str(exc)[:120]})") from None


def _sendable(jobs: Sequence[CompileJob]) -> bool:
    import pickle

    try:
        pickle.dumps(list(jobs))
        return True
    except Exception:  # noqa: BLE001 - e.g. a constexpr that is a function: compiled in the parent instead
        return False


def build(calls: Sequence[Callable[[], Any]]) -> tuple[list[str], list[int]]:
    """Compile what each of `calls` (warmups) would compile, in the pool, then run the calls themselves, which
    load the kernels from Triton's cache. Returns the errors in words (a failed candidate is not run again:
    its launch decides) and the indices of the calls left to the caller (a specialization that cannot be sent
    to a worker). Raises PoolUnavailable when the pool cannot compile here."""
    target = _target()
    pool()
    captured = capture(calls, target)
    errors: list[str] = []
    rest = [i for i, got in enumerate(captured) if not isinstance(got, Exception) and not _sendable(got)]
    jobs = [job for i, got in enumerate(captured) if i not in rest and not isinstance(got, Exception) for job in got]
    results = compile_all(jobs) if jobs else {}
    for i, got in enumerate(captured):
        if i in rest:
            continue
        failed = got if isinstance(got, Exception) else \
            next((results[j.identity()] for j in got if results[j.identity()]), None)
        if failed is None:
            try:
                calls[i]()  # a cache hit now
            except Exception as exc:  # noqa: BLE001 - said in words; the launch decides
                failed = exc
        if failed is not None:
            errors.append(failed if isinstance(failed, str) else f"{type(failed).__name__}: {str(failed)[:200]}")
    return errors, rest
