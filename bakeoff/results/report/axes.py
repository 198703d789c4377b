"""Axis settings shared by the charts: readable log ticks (1-2-5 or decades, no minor-tick clutter) and time
axes that never zoom to sub-millisecond ticks around a single run."""
from __future__ import annotations

import datetime as dt
import math
from typing import Any, Iterable

MAX_TICKS = 9
MIN_TIME_SPAN = dt.timedelta(hours=2)  # a time axis shows at least this much, centred on its points


def tick_text(value: float) -> str:
    """'0.01', '250', '1e-5', '2e6': plain from 1e-3 to 1e5, else mantissa and exponent."""
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:g}"
    exponent = math.floor(math.log10(abs(value)))
    mantissa = round(value / 10.0**exponent, 2)
    if abs(mantissa) >= 10:  # 9.999 rounded up
        mantissa, exponent = mantissa / 10, exponent + 1
    return f"{mantissa:g}e{exponent}"


FINE = (1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9)  # the mantissas of a narrow range's ticks


def log_ticks(values: Iterable[Any]) -> dict[str, Any]:
    """Plotly axis settings for a log axis over `values`: ticks at 1-2-5 per decade, or at decades, or every
    few decades, whichever gives at most MAX_TICKS; 1-9 per decade for a range narrower than that. When fewer
    than two ticks fall between the smallest and the largest value (values within a few percent of each other,
    where plotly's own range would show no tick at all), the range is set to reach the ticks around them."""
    vals = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v) and v > 0]
    if not vals:
        return {"type": "log"}
    lo, hi = min(vals), max(vals)
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))

    def at(mantissas: tuple[float, ...], step: int = 1) -> list[float]:
        return [m * 10.0**e for e in range(e0, e1 + 1, step) for m in mantissas if lo / 1.6 <= m * 10.0**e <= hi * 1.6]

    ticks = at((1, 2, 5))
    if len(ticks) < 3:
        ticks = at(FINE)
    elif len(ticks) > MAX_TICKS:
        ticks = at((1,))
        step = 1
        while len(ticks) > MAX_TICKS:
            step += 1
            ticks = at((1,), step)
    out: dict[str, Any] = {"type": "log", "minor": {"showgrid": False}}
    if sum(lo <= t <= hi for t in ticks) < 2:
        fine = [m * 10.0**e for e in range(e0 - 1, e1 + 2) for m in FINE]
        below = max(t for t in fine if t < lo * (1 - 1e-9))  # strictly around: no point on the axis' edge
        above = min(t for t in fine if t > hi * (1 + 1e-9))
        ticks = [t for t in fine if below <= t <= above]
        pad = 0.05 * math.log10(above / below)
        out["range"] = [math.log10(below) - pad, math.log10(above) + pad]
    out["tickvals"] = ticks
    out["ticktext"] = [tick_text(t) for t in ticks]
    return out


def _as_time(value: Any) -> dt.datetime | None:
    """A naive UTC datetime (plotly.js reads date strings without their offset)."""
    if not isinstance(value, dt.datetime):
        try:
            value = dt.datetime.fromisoformat(str(value))
        except ValueError:
            return None
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value


def time_range(values: Iterable[Any]) -> dict[str, Any]:
    """Plotly settings for a date axis: at least MIN_TIME_SPAN wide around the points (one run alone would
    otherwise get ticks a microsecond apart), minutes as the finest tick label."""
    times = [t for t in (_as_time(v) for v in values) if t is not None]
    if not times:
        return {}
    lo, hi = min(times), max(times)
    if hi - lo >= MIN_TIME_SPAN:
        return {"tickformat": "%Y-%m-%d" if hi - lo > dt.timedelta(days=3) else "%Y-%m-%d %H:%M"}
    mid = lo + (hi - lo) / 2
    return {"range": [(mid - MIN_TIME_SPAN / 2).isoformat(), (mid + MIN_TIME_SPAN / 2).isoformat()],
            "tickformat": "%Y-%m-%d %H:%M"}
