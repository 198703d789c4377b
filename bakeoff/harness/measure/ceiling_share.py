"""A case's share of its device's ceiling, never above 100% of a measured one.

The achieved rate (TFLOP/s or GB/s at the headline latency, from the analytic cost model) over the measured
ceiling. A case that beats the measured ceiling shows that the calibration missed a faster kernel, shape or
clock: the ceiling is then raised to the case's own rate (`pct_of_ceiling` = 100), the record is flagged
(`ceiling_exceeded`) and keeps the share of the calibrated value (`pct_of_ceiling_measured`), and the report
marks it. The datasheet's peak, where known, gives `pct_of_spec_peak` beside it.
"""
from __future__ import annotations

from typing import Any


def ceiling_fields(record: dict[str, Any], ceiling: tuple[str, float], ceilings: dict[str, float]) -> dict[str, Any]:
    """pct_of_ceiling, ceiling (name, value, raised_to), ceiling_exceeded, pct_of_ceiling_measured and
    pct_of_spec_peak for `record` against `ceiling` = (name, measured value); {} without an achieved rate."""
    name, value = ceiling
    achieved = record.get("achieved_tflops") if name.startswith("matmul") else record.get("achieved_gbps")
    if not achieved or value <= 0:
        return {}
    measured = 100.0 * achieved / value
    out: dict[str, Any] = {"pct_of_ceiling_measured": measured, "ceiling_exceeded": measured > 100.0,
                           "ceiling": {"name": name, "value": value}}
    if measured > 100.0:
        out["ceiling"]["raised_to"] = achieved
    out["pct_of_ceiling"] = min(measured, 100.0)
    spec = ceilings.get(f"spec_{name}")
    if spec:
        out["pct_of_spec_peak"] = 100.0 * achieved / spec
    return out
