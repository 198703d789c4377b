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


def _options_why(base: dict[str, Any], cand: dict[str, Any], revisions: tuple[Any, Any]) -> str:
    """What differs in the backend options: the stored options by name; where they are equal, the digest covers
    the defaults the harness filled in (not stored), so the backend's defaults changed, with the harness
    revisions where they differ; else the digests alone."""
    named = _dict_diff(base.get("options"), cand.get("options"))
    if named:
        return "backend options differ: " + named
    digests = f"{base.get('options_digest')} → {cand.get('options_digest')}"
    stored = base.get("options"), cand.get("options")
    if not all(isinstance(o, dict) for o in stored):  # not stored on a side: nothing to tell
        return f"backend options differ: options digest {digests}"
    rev_b, rev_c = revisions
    moved = f" (harness revision {rev_b} → {rev_c})" if rev_b and rev_c and rev_b != rev_c else ""
    return (f"backend options differ: the backend's defaults changed{moved}: the stored options are equal "
            f"({_canon(stored[0])}) but their digest with defaults filled in is not ({digests})")


def _why(field: str, base: dict[str, Any], cand: dict[str, Any], revisions: tuple[Any, Any]) -> str:
    b, c = base.get(field), cand.get(field)
    if field == "graph_digest":
        return f"the bound graph differs (digest {b} → {c})"
    if field == "options_digest":
        return _options_why(base, cand, revisions)
    if field == "timing_digest":
        named = _dict_diff(base.get("timing_settings"), cand.get("timing_settings"))
        return "timing settings differ: " + (named or f"digest {b} → {c}")
    if field == "timing_method":
        return f"timing method differs: {b} → {c}"
    return f"{field} differs: {b} → {c}"


def incomparable(metric: str, base: dict[str, Any], cand: dict[str, Any],
                 revisions: tuple[Any, Any] = (None, None)) -> list[str]:
    """Why `metric` of `base` and `cand` may not be compared; [] when it may. `revisions`, the harness revision
    each record was written by where known, helps say why options whose stored values are equal differ."""
    out = []
    for field in COMPARABLE_BY.get(metric, SAME_CASE):
        b, c = base.get(field), cand.get(field)
        if b is not None and c is not None and _canon(b) != _canon(c):
            out.append(_why(field, base, cand, revisions))
    return out
