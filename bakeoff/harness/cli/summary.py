"""The summary table of a run's records (rich), as printed by `bakeoff run` and `bakeoff show`."""
from __future__ import annotations

from typing import Any, Iterable

from rich.table import Table

_STATUS_STYLE = {"ok": "green", "skipped": "dim", "mismatch": "red", "compile_error": "red", "runtime_error": "red",
                 "timeout": "yellow", "oom": "yellow", "crash": "red"}


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _latency(r: dict[str, Any]) -> str:
    """The headline latency [p20–p80] (harness.measure.figures), the timer's for records without one."""
    new = r.get("headline_ms") is not None
    med = r.get("headline_ms") if new else r.get("latency_ms_median")
    if med is None:
        return "-"
    lo, hi = (r.get("headline_p20_ms"), r.get("headline_p80_ms")) if new else (r.get("latency_ms_p20"),
                                                                               r.get("latency_ms_p80"))
    spread = f" [{lo:.3g}–{hi:.3g}]" if lo is not None and hi is not None else ""
    return f"{med:.4g}{spread}"


def _compile(r: dict[str, Any]) -> str:
    cold, warm = r.get("compile_s"), r.get("compile_warm_s")
    if cold is None:
        return "-"
    text = f"{cold:.3g}"
    if warm is not None:
        hit = r.get("cache_hit_warm")
        text += f" / {warm:.3g}" + ("" if hit is None else (" hit" if hit else " miss"))
    return text


def terminal_summary(records: Iterable[dict[str, Any]], title: str = "") -> Table:
    """One row per case: status, compile (cold / warm), latency median [p20–p80], speedup and errors."""
    t = Table(title=title, show_lines=False, header_style="bold")
    for col, justify in (("workload", "left"), ("shape", "left"), ("dtype", "left"), ("backend", "left"),
                         ("status", "left"), ("compile s cold / warm", "right"), ("latency ms [p20–p80]", "right"),
                         ("speedup vs eager", "right"), ("err vs eager (rel L2)", "right"),
                         ("err vs fp64 (rel L2)", "right"), ("× eager err", "right")):
        t.add_column(col, justify=justify, overflow="fold")
    for r in records:
        status = r.get("status") or "?"
        style = _STATUS_STYLE.get(status, "")
        reason = r.get("reason")
        status_text = f"[{style}]{status}[/]" + (f"\n[dim]{reason[:80]}[/]" if reason and status != "ok" else "")
        t.add_row(r.get("workload", ""), r.get("shape", ""), r.get("dtype", ""), r.get("backend", ""), status_text,
                  _compile(r), _latency(r), _num(r.get("speedup_vs_eager"), ".3g") + ("×" if r.get("speedup_vs_eager") else ""),
                  _num(r.get("err_rel_l2_vs_eager"), ".2e"), _num(r.get("err_rel_l2_vs_fp64"), ".2e"),
                  _num(r.get("err_ratio_vs_eager"), ".3g"))
    return t
