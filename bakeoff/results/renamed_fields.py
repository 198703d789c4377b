"""Record fields stored under an older name, and the read path that gives them their current one.

A record field (results/record.py) is renamed when its name did not say its unit. A store written before keeps
the old name in two places: a column of `records` (renamed in place by the schema migration,
results/migrations.py) and the keys of the `details` JSON of every old row, which stay as written and are
renamed here as a row is read (`current_names`), so every reader (the typed record, the report, compare, the
dashboard, the exports, the terminal summary) sees the current names only.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# old field name -> current name
RENAMED: dict[str, str] = {
    "samples": "samples_ms",
    "eager_samples": "eager_samples_ms",
    "device_span_samples": "device_span_samples_ms",
    "eager_device_span_samples": "eager_device_span_samples_ms",
    "timing_windows": "timing_windows_epoch_s",
    "compile_windows": "compile_windows_epoch_s",
}
# a field holding a list of objects -> (old key -> current key) inside each object
RENAMED_KEYS: dict[str, dict[str, str]] = {
    "gpu_other_processes": {"sm_util": "sm_util_pct", "mem_util": "mem_util_pct"},
}


def current_names(row: Mapping[str, Any]) -> dict[str, Any]:
    """`row` (a record's flat fields, or a row of `records` with its `details`) with every old field name
    renamed to the current one, in `details` too. Where both names hold a value, the current one's stands and
    the old one is kept as it is (a legacy field)."""
    out = _renamed(row)
    details = out.get("details")
    if isinstance(details, Mapping):
        out["details"] = _renamed(details)
    return out


def _renamed(fields: Mapping[str, Any]) -> dict[str, Any]:
    out = _moved(fields, RENAMED)
    for name, keys in RENAMED_KEYS.items():
        items = out.get(name)
        if isinstance(items, list):
            out[name] = [_moved(item, keys) if isinstance(item, Mapping) else item for item in items]
    return out


def _moved(fields: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """`fields` with each old name's value under its new name, where the new name holds none."""
    out = dict(fields)
    for old, new in names.items():
        if old in out and out.get(new) is None:
            out.pop(new, None)
            out[new] = out.pop(old)
    return out
