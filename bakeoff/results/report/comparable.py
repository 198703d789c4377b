"""Whether two records of one case measured the same thing, metric by metric, and why not; and whether a
record's measurement was noisy. Used by compare and the dashboard, which never count a change across
different graphs, options or timing settings as a regression.

A metric of two records is comparable when the record fields COMPARABLE_BY[metric] agree. A field missing from
either record (records written before it existed) cannot tell, and does not stop the comparison.
"""
from __future__ import annotations

import json
from typing import Any

SAME_CASE = ("graph_digest", "options_digest")  # the same computation, compiled with the same options
COMPARABLE_BY: dict[str, tuple[str, ...]] = {
    "status": SAME_CASE,
    "headline_ms": SAME_CASE + ("timing_digest", "timing_method", "headline_method"),
    "compile_s": SAME_CASE,
    "compile_warm_s": SAME_CASE,
    "err_rel_l2_vs_fp64": SAME_CASE + ("seeds",),  # errors depend on the inputs
    "cache_hit_warm": SAME_CASE,
}


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _dict_diff(a: Any, b: Any) -> str:
    """'flush_l2 True → False, mode none → default' for two mappings."""
    a, b = (a if isinstance(a, dict) else {}), (b if isinstance(b, dict) else {})
    keys = sorted(k for k in set(a) | set(b) if _canon(a.get(k)) != _canon(b.get(k)))
    return ", ".join(f"{k} {a.get(k, '(unset)')} → {b.get(k, '(unset)')}" for k in keys)


def _why(field: str, base: dict[str, Any], cand: dict[str, Any]) -> str:
    b, c = base.get(field), cand.get(field)
    if field == "graph_digest":
        return f"the bound graph differs (digest {b} → {c})"
    if field == "options_digest":
        return "backend options differ: " + (_dict_diff(base.get("options"), cand.get("options")) or f"{b} → {c}")
    if field == "timing_digest":
        named = _dict_diff(base.get("timing_settings"), cand.get("timing_settings"))
        return "timing settings differ: " + (named or f"digest {b} → {c}")
    if field == "timing_method":
        return f"timing method differs: {b} → {c}"
    return f"{field} differs: {b} → {c}"


def incomparable(metric: str, base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """Why `metric` of `base` and `cand` may not be compared; [] when it may."""
    out = []
    for field in COMPARABLE_BY.get(metric, SAME_CASE):
        b, c = base.get(field), cand.get(field)
        if b is not None and c is not None and _canon(b) != _canon(c):
            out.append(_why(field, base, cand))
    return out
