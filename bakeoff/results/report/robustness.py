"""The report's "Numerical robustness" table: the numerics suite's traps as rows, backends as columns.

A cell grades one backend on one trap in one dtype: `failed` (the verdict is not ok: a mismatch, or an
error or crash), `worse than eager` (ok, but its error against float64 is more than WORSE_RATIO times
eager's and above rounding level, i.e. its relative L2 error exceeds the dtype's unit roundoff), `passed`
(otherwise), `skipped` (with the reason). Each cell gives the figures: the error as a multiple of eager's,
the relative L2 error against float64, and the worst element (index, value, the float64 value, eager's).
Reads the store only; the traps' descriptions come from the suite (workloads/traps.py).
"""
from __future__ import annotations

from typing import Any

from bakeoff.results.report.data import RunData, fnum, run_labels, unit_roundoff
from bakeoff.results.report.html import Cell, esc, table
from bakeoff.workloads.traps import numerics_workloads

WORSE_RATIO = 1.1  # an error more than 10% above eager's (and above rounding level) is "worse than eager"
GRADE_CLASS = {"passed": "ok", "worse than eager": "warn", "failed": "bad", "skipped": "dim"}
DTYPE_ORDER = ("float32", "float16", "bfloat16")
# Significant digits that tell two neighbouring values of the dtype apart (the reference gets one more).
DIGITS = {"float32": 9, "float16": 5, "bfloat16": 4}


def grade(case: dict[str, Any]) -> str:
    """passed, worse than eager, failed or skipped (see the module docstring)."""
    status = case.get("status")
    if status == "skipped":
        return "skipped"
    if status != "ok":
        return "failed"
    ratio, rel = fnum(case.get("err_ratio_vs_eager")), fnum(case.get("err_rel_l2_vs_fp64"))
    if ratio is not None and rel is not None and ratio > WORSE_RATIO and rel > unit_roundoff(case.get("dtype")):
        return "worse than eager"
    return "passed"


def _g(value: Any, digits: int) -> str:
    x = fnum(value)
    return str(value) if x is None else f"{x:.{digits}g}"


def _cell(case: dict[str, Any] | None) -> Cell:
    if case is None:
        return Cell("-", cls="dim")
    word = grade(case)
    lines = [f'<span class="{GRADE_CLASS[word]}">{esc(word)}</span>']
    if word == "skipped" or (word == "failed" and case.get("reason")):
        lines.append(f'<span class="note">{esc(str(case.get("reason") or "")[:100])}</span>')
    ratio, rel = fnum(case.get("err_ratio_vs_eager")), fnum(case.get("err_rel_l2_vs_fp64"))
    figures = [f"{ratio:.3g}× eager"] if ratio is not None else []
    figures += [f"rel L2 {rel:.2e}"] if rel is not None else []
    if figures:
        lines.append(esc(" · ".join(figures)))
    if case.get("worst_elem_index") is not None:
        eager, digits = case.get("worst_elem_eager"), DIGITS.get(str(case.get("dtype")), 9)
        lines.append(esc(f"worst {case['worst_elem_index']}: {_g(case.get('worst_elem_value'), digits)} vs fp64 "
                         f"{_g(case.get('worst_elem_ref'), digits + 1)}"
                         + ("" if eager is None else f" (eager {_g(eager, digits)})")))
    if word != "failed" and case.get("err_within_tol_vs_fp64") is False:
        lines.append('<span class="note">outside assert_close tolerance vs fp64</span>')
    return Cell("<br>".join(lines), raw=True, cls="cell-" + word.replace(" ", "-"))


def robustness_section(runs: list[RunData]) -> str:
    """The heading, the table and the traps' descriptions; '' when no run has a case of the numerics suite."""
    traps = numerics_workloads()
    labels = run_labels(runs)
    rows: dict[tuple, dict[str, dict[str, Any]]] = {}
    backends: list[str] = []
    for r in runs:
        for c in r.cases:
            if c.get("workload") not in traps:
                continue
            key = (labels[r.run_id], c["workload"], str(c.get("shape") or ""), str(c.get("dtype") or ""))
            rows.setdefault(key, {})[str(c.get("backend"))] = c
            if str(c.get("backend")) not in backends:
                backends.append(str(c.get("backend")))
    if not rows:
        return ""
    backends.sort(key=lambda b: (b != "eager", b))  # eager, the yardstick, first
    order = list(traps)
    several = len(runs) > 1
    headers = (["run"] if several else []) + ["trap", "dtype"] + backends
    body = []
    dtype_rank = {d: i for i, d in enumerate(DTYPE_ORDER)}
    for key in sorted(rows, key=lambda k: (k[0], order.index(k[1]), k[2], dtype_rank.get(k[3], 9), k[3])):
        run, workload, shape, dtype = key
        head = Cell(f"<b>{esc(workload)}</b><br><span class=\"note\">{esc(traps[workload].description)}; "
                    f"{esc(shape)}</span>", raw=True)
        cells = [_cell(rows[key].get(b)) for b in backends]
        body.append(([Cell(run)] if several else []) + [head, Cell(dtype)] + cells)
    shown = [w for w in order if any(k[1] == w for k in rows)]
    notes = "".join(f"<dt><b>{esc(w)}</b></dt><dd>{esc(traps[w].trap)}<br><i>Expected:</i> "
                    f"{esc(traps[w].expected)}</dd>" for w in shown)
    return ("<h2>Numerical robustness</h2>"
            '<p class="note">The numerics suite: each row opens one trap. A cell is <b>failed</b> when the verdict '
            f"is not ok, <b>worse than eager</b> when it passed but its error against float64 is more than "
            f"{WORSE_RATIO:g}× eager's and above the dtype's unit roundoff, else <b>passed</b>; then the error as a "
            "multiple of eager's, "
            "the relative L2 error against float64, and the worst element (the one furthest outside assert_close's "
            "tolerance: index, value, float64 value, eager's value). Eager's own cell is graded against its own "
            "error, so its ratio is 1: read its relative L2 and worst element.</p>"
            + table(headers, body, sortable=False, table_id="robustness")
            + f'<dl class="note" id="traps">{notes}</dl>')
