"""The speedup heatmap: workload × backend, one table per dtype, each cell coloured by log2 speedup over eager.

Each cell shows the speedup; the fastest backend of a row is bold when it wins outright (its 95% interval
clears every other's) and marked ≈ when it ties (report/decision.py); a noisy speedup (`speedup_quality`,
judged on the paired ratios; the headline's quality for older records) is marked *; a failed case is a ✗ with
its status and reason on hover. Backends skipped on every case are left out and named (the scoreboard says why). A cell's
`data-case` and `data-x` (case label, series) let a click open its code (report/code_view.py).

It is plain HTML, not a plotly chart: the first screen is usable before plotly.js (4.8 MB) is parsed, which took
1.5–2 s of a 2–3.5 s load on a 2-core machine; the folded charts draw with plotly when opened.
"""
from __future__ import annotations

import math
from typing import Any

from plotly.colors import sample_colorscale

from bakeoff.results.report.charts_common import rows
from bakeoff.results.report.data import RunData, case_label, headline_ms, run_labels, series_name
from bakeoff.results.report.headline_facts import speedup_noise_note, speedup_quality
from bakeoff.results.report.decision import MIN_WIN_MARGIN_PCT, Speed, Verdict, speed_of, verdicts
from bakeoff.results.report.html import esc

TITLE = ("Speedup over eager (× faster; <b>bold</b> wins outright, ≈ ties: within the 95% intervals or "
         f"{MIN_WIN_MARGIN_PCT:g}%, * noisy speedup (its paired samples), ✗ failed; blue faster, red slower; click "
         "a cell for its code)")
CSS = """
#speedup table.hm{margin:4px 0 8px 0;font-size:12px}
#speedup td.hm-cell,#speedup td.hm-fail{text-align:right;cursor:pointer;min-width:3.2em;white-space:nowrap}
#speedup td.hm-fail{color:#c62828;text-align:center;font-size:14px}
#speedup th.hm-x{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;max-height:9em;height:auto}
#speedup th.hm-dt{text-align:center;border-left:2px solid #888}
#speedup .hm-first{border-left:2px solid #888}
#speedup td,#speedup th{padding:2px 5px;height:22px}
"""


def _row(case: dict[str, Any]) -> tuple[str, str]:
    """(workload, shape): a heatmap row, named by its workload with the shape on hover."""
    return str(case.get("workload")), str(case.get("shape"))


def speedup_heatmap(runs: list[RunData]) -> str | None:
    """The heatmap's HTML, `<div id="speedup">` (see the module docstring); None when no case ran."""
    labels = run_labels(runs)
    cells: dict[tuple[str, tuple[str, str], str], dict[str, Any]] = {}  # (dtype, row, series) -> case
    xs, ys, dtypes, skipped_everywhere = [], [], [], {}
    for r in runs:
        for c in r.cases:
            x = series_name(c, labels[r.run_id])
            skipped_everywhere[x] = skipped_everywhere.get(x, True) and c.get("status") == "skipped"
    for _, label, c in rows(runs):
        x, y, dt = series_name(c, label), _row(c), str(c.get("dtype"))
        for seq, v in ((xs, x), (ys, y), (dtypes, dt)):
            seq.append(v) if v not in seq else None
        cells[(dt, y, x)] = c
    if not cells:
        return None
    marks = _leader_marks(runs)
    lim = max([abs(math.log2(s.speedup)) for c in cells.values() if (s := speed_of(c))] + [1.0])
    left_out = [x for x, skipped in skipped_everywhere.items() if skipped]
    note = (f'<p class="note">not shown, skipped on every case: {esc(", ".join(left_out))}</p>' if left_out else "")
    return (f'<style>{CSS}</style><div id="speedup"><p><b>{TITLE}</b></p>{note}'
            f'{_table(dtypes, xs, ys, cells, marks, lim)}</div>')


def _table(dtypes: list[str], xs: list[str], ys: list[tuple[str, str]], cells: dict, marks: dict[int, str],
           lim: float) -> str:
    """One table: a row per workload, a column group per dtype, a column per backend in each."""
    groups = "".join(f'<th class="hm-dt" colspan="{len(xs)}">{esc(dt)}</th>' for dt in dtypes)
    heads = "".join(f'<th class="hm-x{" hm-first" if i == 0 else ""}">{esc(x)}</th>'
                    for _ in dtypes for i, x in enumerate(xs))
    body = []
    for y in ys:
        tds = "".join(_cell(cells.get((dt, y, x)), x, marks, lim, i == 0) for dt in dtypes for i, x in enumerate(xs))
        body.append(f'<tr><th title="{esc(y[1])}">{esc(y[0])}</th>{tds}</tr>')
    return (f'<table class="hm"><thead><tr><th></th>{groups}</tr><tr><th></th>{heads}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _leader_marks(runs: list[RunData]) -> dict[int, str]:
    """'win' or 'tie' by id() of the leading cases of each verdict."""
    out: dict[int, str] = {}
    for v in verdicts(runs):
        _mark(v, out)
    return out


def _mark(v: Verdict, out: dict[int, str]) -> None:
    if v.winner is not None and len(v.ranked) > 1:
        out[id(v.winner.case)] = "win"
    elif v.is_tie:
        for s in v.tied:
            out[id(s.case)] = "tie"


def _cell(case: dict[str, Any] | None, x: str, marks: dict[int, str], lim: float, first: bool = False) -> str:
    """One cell: the speedup on its colour, a ✗ for a failed case, empty where the case did not run; `first`:
    the first of its dtype's columns (a rule before it)."""
    cls = " hm-first" if first else ""
    if case is None:
        return f'<td class="hm-none{cls}" title="not run"></td>'
    where = f'data-case="{esc(case_label(case))}" data-x="{esc(x)}"'
    s = speed_of(case)
    if s is None:
        why = f"{x} / {case_label(case)}\n{case.get('status')}\n{str(case.get('reason') or '')[:600]}"
        return f'<td class="hm-fail{cls}" {where} title="{esc(why)}">✗</td>'
    quality, note = speedup_quality(case), speedup_noise_note(case)
    reasons = [note] if note else []
    mark = marks.get(id(case))
    text = esc(f"{s.speedup:.2f}" + ("*" if quality == "noisy" else ""))
    text = f"<b>{text}</b>" if mark == "win" else ("≈" + text if mark == "tie" else text)
    t = min(1.0, max(0.0, 0.5 + math.log2(s.speedup) / (2 * lim)))
    ink = "#fff" if abs(t - 0.5) > 0.32 else "#111"
    return (f'<td class="hm-cell{cls}" {where} style="background:{sample_colorscale("RdBu", [t])[0]};color:{ink}" '
            f'title="{esc(_hover(s, quality, reasons))}">{text}</td>')


def _hover(s: Speed, quality: str | None, reasons: list[str]) -> str:
    eager_ms = s.case.get("eager_headline_ms") or s.case.get("eager_latency_ms_median") or 0.0
    ms = headline_ms(s.case) or 0.0
    lines = [f"{s.backend} / {case_label(s.case)}", f"speedup {s.speedup:.3g}× (eager {eager_ms:.4g} ms → {ms:.4g} ms)",
             f"95% interval {s.low:.3g}–{s.high:.3g}× ({s.source})", f"speedup {quality or 'quality not judged'}"]
    return "\n".join(lines + [r[:300] for r in reasons[:4]])
