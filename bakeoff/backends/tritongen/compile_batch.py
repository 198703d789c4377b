"""Compile a search's candidates of every kernel in one batch of threads, launcher stubs included.

Two costs of a cold compile that the kernels' own compile does not show:
- Triton (3.x on CUDA) builds a C launcher stub for each distinct kernel signature with the host C compiler
  (`gcc -O3`, about 0.2 s each) at the kernel's first launch, in the timed part of the search, one after
  another. Here each stub is built while its kernel compiles, in a thread of its own, from the source Triton's
  JIT hands the compile (its signature and constants are all the stub's C source reads, unless the signature
  holds host TMA descriptors, whose layout only the compiled kernel tells); failing that, by the compile thread
  right after the kernel compiles (`CudaLauncher` puts it in Triton's cache under the hash of its C source; the
  first launch then loads it from there). The C compiler is a subprocess, so those builds overlap each other
  and the kernels' compiles: a single kernel's stub no longer waits for its compile to end.
- Kernels compiled one kernel at a time overlap at most that kernel's candidates (two in the pruned search);
  `compile_jobs` submits every kernel's candidates at once.
Triton's LLVM stage holds the GIL (measured offline: its seconds double with two threads on two cores), so the
threads overlap the frontend and LLVM of one candidate with ptxas and the C compiler of others, not LLVM with LLVM.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, Callable, Sequence

_BUILT: dict[str, threading.Lock] = {}  # launcher signature -> held while one thread builds it
_DONE: set[str] = set()  # signatures built (or tried) in this process
_GUARD = threading.Lock()


# What a stub built before its kernel's compile ends gets for the compiled kernel's metadata: the launcher's C
# source reads no more of it than the TMA descriptor layout (none without tensordesc arguments); the launcher
# object keeps the rest, and is thrown away.
_BEFORE_COMPILE = SimpleNamespace(tensordesc_meta=None, num_ctas=1, global_scratch_size=0, global_scratch_align=1,
                                  profile_scratch_size=0, profile_scratch_align=1, launch_cooperative_grid=False,
                                  launch_pdl=False)


def launcher_key(src: Any, meta: Any) -> str:
    """What Triton's launcher source depends on: the signature, the constants and TMA descriptor metadata (none
    and an empty list alike)."""
    descs = getattr(meta, "tensordesc_meta", None) or None
    return repr((sorted(getattr(src, "signature", {}).items(), key=str),
                 sorted(getattr(src, "constants", {}).items(), key=str), descs))


def prebuild_launcher(src: Any, meta: Any, compiled: bool = True) -> None:
    """Build the launcher stub of kernel source `src` (`compiled`: with the compiled kernel's `meta`, else before
    the compile ends) into Triton's cache, once per signature in this process (a thread with the same signature
    waits for it). A failure before the compile ends is left to the compile's own build, a failure after it to the
    kernel's first launch, which builds it and says."""
    from triton.runtime.driver import driver

    key = launcher_key(src, meta)
    with _GUARD:
        lock = _BUILT.setdefault(key, threading.Lock())
    with lock:
        if key in _DONE:
            return
        try:
            driver.active.launcher_cls(src, meta)
        except Exception:  # noqa: BLE001 - not this stage's to report: a later build decides
            if not compiled:
                return
        _DONE.add(key)


def source_before_compile(compile_fn: Any) -> Any | None:
    """The kernel source (Triton's ASTSource: the jit function, signature and constants) that the function Triton's
    JIT hands an async compile closes over, where its stub needs nothing from the compile (no host TMA
    descriptor in the signature); else None, as for a Triton whose closure holds no such source."""
    for cell in getattr(compile_fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if all(hasattr(v, a) for a in ("fn", "signature", "constants")) and isinstance(v.signature, dict):
            return None if any("tensordesc" in str(t) for t in v.signature.values()) else v
    return None


class LauncherPool(ThreadPoolExecutor):
    """Threads for Triton's AsyncCompileMode: each compile's launcher stub is built beside it, in a thread of the
    stub pool, where the source tells it (`source_before_compile`), else in the compile's thread once it is done
    (a compile's own error stays on its future, where compile_jobs reads it)."""

    def __init__(self, threads: int) -> None:
        super().__init__(threads, thread_name_prefix="tritongen-compile")
        self.stubs = ThreadPoolExecutor(threads, thread_name_prefix="tritongen-stub")

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        early = source_before_compile(fn)
        if early is not None:
            self.stubs.submit(prebuild_launcher, early, _BEFORE_COMPILE, False)

        def run() -> Any:
            kernel = fn(*args, **kwargs)
            if hasattr(kernel, "src") and hasattr(kernel, "metadata"):
                prebuild_launcher(kernel.src, kernel.metadata)  # built already where it was early
            return kernel
        return super().submit(run)

    def shutdown(self, wait: bool = True, **kwargs: Any) -> None:
        super().shutdown(wait, **kwargs)
        self.stubs.shutdown(wait)


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
