"""Stand-ins for Triton's JIT functions in tests of tritongen's config search (tests only)."""
from __future__ import annotations

import inspect
from typing import Any, Callable


def async_fn(compile_fn: Callable[[str], Any]) -> Any:
    """A jit function stand-in whose warmup submits `compile_fn(name)` (name: the launch's NAME constexpr) to
    Triton's AsyncCompileMode, as a real warmup does inside the search's compile batch."""
    from triton.runtime import _async_compile

    class Fn:
        def warmup(self, *args, grid, **kwargs):
            mode = _async_compile.active_mode.get()
            assert mode is not None, "compiled outside AsyncCompileMode"
            name = kwargs["NAME"]
            hooks = (lambda kernel: None,) * (len(inspect.signature(mode.submit).parameters) - 2)
            return mode.submit(name, lambda: compile_fn(name), *hooks)  # Triton 3.9 adds a cleanup hook
    return Fn()
