"""How a failure becomes a record's status: an out-of-memory error is `oom` wherever it happens; a failure in
the first run after a compile is a `runtime_error`, unless a lazy compiler (torch.compile) raised it there,
which makes it a `compile_error`. The supervisor reads a dead worker's output with `mentions_oom` too
(supervise/deaths.py): this module imports no torch.
"""
from __future__ import annotations

import traceback
from typing import Any


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


class FirstRunError(Exception):
    """The backend compiled but its first run failed; `__cause__` is the real error."""
