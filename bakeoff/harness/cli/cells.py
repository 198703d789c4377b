"""What the terminal summary (cli/summary.py) and the sweep lines under it (cli/sweep_summary.py) both write:
a status's colour, a latency's digits, a stored record made flat."""
from __future__ import annotations

from typing import Any

STATUS_STYLE = {"ok": "green", "skipped": "dim", "mismatch": "red", "compile_error": "red",
                "runtime_error": "red", "timeout": "yellow", "oom": "yellow", "crash": "red",
                "warm compile failed": "yellow"}


def fmt_ms(value: float | None) -> str:
    """A latency in ms with 3 significant digits, never in exponent form ('0.0123', '4.56', '1234')."""
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value:.0f}"
    text = f"{value:.3g}"
    if "e" in text:  # below 1e-4 ms: fixed point with 3 significant digits
        text = f"{value:.{3 - int(f'{value:e}'.split('e')[1]) - 1}f}"
    return text



def stored_flat(record: dict[str, Any]) -> dict[str, Any]:
    """A stored record's columns with its `details` merged in (columns win), as results.export.flatten."""
    return {**(record.get("details") or {}), **{k: v for k, v in record.items() if k != "details"}}
