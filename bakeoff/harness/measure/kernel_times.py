"""Every kernel CUPTI saw in the profiled calls, per name: launches, device time and share of the call.

The record keeps the list as `kernel_times` (longest first); the report maps each name to the backend's
generated code (results/report/kernels.py)."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable

MAX_NAME_CHARS = 1000  # C++ template kernel names (ATen, ONNX Runtime, cuBLAS) can run to thousands


def kernel_times(kernels: Iterable[tuple[str, float]], calls: int) -> list[dict[str, Any]]:
    """Per kernel name, from (name, device µs) of each kernel launch over `calls` calls: `launches` per call,
    `device_ms` per call and `share` of the calls' summed kernel time (None when that is 0); longest first.
    Names longer than MAX_NAME_CHARS are cut there (and end in '…')."""
    total_us: dict[str, float] = defaultdict(float)
    launches: Counter[str] = Counter()
    for name, us in kernels:
        name = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS - 1] + "…"
        total_us[name] += us
        launches[name] += 1
    all_us = sum(total_us.values())
    return [{"name": name, "launches": launches[name] / calls, "device_ms": total_us[name] / calls / 1e3,
             "share": total_us[name] / all_us if all_us > 0 else None}
            for name in sorted(total_us, key=lambda n: (-total_us[n], n))]
