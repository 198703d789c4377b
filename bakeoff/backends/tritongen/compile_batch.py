"""Compile a search's candidates of every kernel in one batch of threads, launcher stubs included.

Two costs of a cold compile that the kernels' own compile does not show:
- Triton (3.x on CUDA) builds a C launcher stub for each distinct kernel signature with the host C compiler
  (`gcc -O3`, about 0.2 s each) at the kernel's first launch, in the timed part of the search, one after
  another. Here each compile thread builds its kernel's stub right after the kernel compiles (`CudaLauncher`
  puts it in Triton's cache under the hash of its C source; the first launch then loads it from there). The C
  compiler is a subprocess, so those builds overlap each other and the kernels' compiles.
- Kernels compiled one kernel at a time overlap at most that kernel's candidates (two in the pruned search);
  `compile_jobs` submits every kernel's candidates at once.
Triton's LLVM stage holds the GIL (measured offline: its seconds double with two threads on two cores), so the
threads overlap the frontend and LLVM of one candidate with ptxas and the C compiler of others, not LLVM with LLVM.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

_BUILT: dict[str, threading.Lock] = {}  # launcher signature -> held while one thread builds it
_DONE: set[str] = set()  # signatures built (or tried) in this process
_GUARD = threading.Lock()


def launcher_key(kernel: Any) -> str:
    """What Triton's launcher source depends on: the signature, the constants and TMA descriptor metadata."""
    src, meta = kernel.src, kernel.metadata
    return repr((sorted(getattr(src, "signature", {}).items(), key=str),
                 sorted(getattr(src, "constants", {}).items(), key=str), getattr(meta, "tensordesc_meta", None)))


def prebuild_launcher(kernel: Any) -> None:
    """Build `kernel`'s launcher stub into Triton's cache, once per signature in this process (a thread with the
    same signature waits for it); a failure is left to the kernel's first launch, which builds it and says."""
    from triton.runtime.driver import driver

    key = launcher_key(kernel)
    with _GUARD:
        lock = _BUILT.setdefault(key, threading.Lock())
    with lock:
        if key in _DONE:
            return
        try:
            driver.active.launcher_cls(kernel.src, kernel.metadata)
        except Exception:  # noqa: BLE001 - not this stage's to report: the first launch builds it and decides
            pass
        _DONE.add(key)


class LauncherPool(ThreadPoolExecutor):
    """Threads for Triton's AsyncCompileMode that build each compiled kernel's launcher stub in the thread that
    compiled it (a compile's own error stays on its future, where compile_jobs reads it)."""

    def __init__(self, threads: int) -> None:
        super().__init__(threads, thread_name_prefix="tritongen-compile")

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        def run() -> Any:
            kernel = fn(*args, **kwargs)
            if hasattr(kernel, "src") and hasattr(kernel, "metadata"):
                prebuild_launcher(kernel)
            return kernel
        return super().submit(run)


def compile_jobs(calls: Sequence[Callable[[], list]], threads: int) -> list[str | None]:
    """Run `calls` (each returns the warmups' results of one candidate) inside Triton's AsyncCompileMode on
    `threads` threads; per call, None when every kernel it asked for compiled, else the first error in words."""
    from triton.runtime._async_compile import AsyncCompileMode

    if not calls:
        return []
    got: list[list | Exception] = []
    with LauncherPool(max(1, min(threads, len(calls)))) as pool, AsyncCompileMode(pool, ignore_errors=True):
        for call in calls:
            try:  # the executor's futures, taken now: Triton drops its FutureKernel's reference once finalized
                got.append([getattr(kernel, "__dict__", {}).get("future") for kernel in call()])
            except Exception as exc:  # noqa: BLE001 - the candidate's own error (arguments, frontend), said
                got.append(exc)
    return [_said(res) for res in got]


def _said(res: list | Exception) -> str | None:
    if isinstance(res, Exception):
        return f"{type(res).__name__}: {str(res)[:80]}"
    for future in res:  # None: a kernel the JIT held already
        exc = future.exception() if future is not None else None
        if exc is not None:
            return f"{type(exc).__name__}: {str(exc)[:80]}"
    return None
