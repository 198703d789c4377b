"""The two tables a report leads with: the scoreboard (one line per backend, compared over the cases all of them
passed) and the per-workload verdict (the winner and its margin, eager, or a tie), each reason one click away
(report/decision.py computes them)."""
from __future__ import annotations

from bakeoff.results.report.decision import (LACK_KINDS, MIN_WIN_MARGIN_PCT, BackendScore, Scoreboard, Speed,
                                             Verdict, eager_moved_note, is_eager)
from bakeoff.results.report.headline_facts import EAGER_APART_REL
from bakeoff.results.report.html import Cell, esc, table
from bakeoff.results.report.weights import Recommendation


def _num(x: float | None, fmt: str, suffix: str = "") -> Cell:
    return Cell("-" if x is None else format(x, fmt) + suffix, x, "num")


def _counts(counts: dict[str, int]) -> Cell:
    """'33 not installed' (several classes joined by ', '), '0' when none."""
    n = sum(counts.values())
    if not n:
        return Cell("0", 0, "num dim")
    return Cell(", ".join(f"{v} {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])), n, "num warn")


SCOREBOARD_NOTE = (
    "<style>#scoreboard td{white-space:nowrap}</style>"
    '<p class="note">× eager: the geomean speedup over the dtype\'s <b>common</b> cases (passed by every backend '
    "that passed any), the ranking; <b>own</b>: over the cases the backend passed, with their count and why it "
    "lacks the rest.</p>")


def scoreboard_table(board: Scoreboard, dtypes: list[str]) -> str:
    """Per backend: geomean speedup over eager per dtype over the common cases (the ranking), the same over its
    own passing cases with what it lacks, cases won, tied, failed and skipped (reason class), not run, median
    cold and warm compile."""
    headers = (["backend"] + [f"{d} × ({len(board.common.get(d, ()))} common)" for d in dtypes] +
               [f"{d} own" for d in dtypes] +
               ["won", "tied", "failed", "skipped", "not run", "cold compile s (median)", "warm compile s (median)"])
    body = []
    for b in board.backends:
        not_run = sum(b.lacks(d, "not run") for d in b.lacking)
        not_run_cell = Cell(str(not_run), not_run, "num warn" if not_run else "num dim")
        body.append([Cell(b.backend, b.backend)] + [_geomean(board.common_geomean(b, d)) for d in dtypes] +
                    [_own(b, d) for d in dtypes] +
                    [_num(b.won, "d"), _num(b.tied, "d"), _counts(b.failed), _counts(b.skipped),
                     not_run_cell, _num(b.cold_median_s, ".3g"), _num(b.warm_median_s, ".3g")])
    return SCOREBOARD_NOTE + table(headers, body, table_id="scoreboard")


def _geomean(g: float | None) -> Cell:
    return Cell("-" if g is None else f"{g:.2f}×", g, "num " + ("ok" if g and g > 1 else ""))


def _own(b: BackendScore, dtype: str) -> Cell:
    """'1.52× 9/11: 2 not run', or '1.51× 11/11': its geomean over the cases of the dtype it passed."""
    g, passed = b.geomean(dtype), b.passed(dtype)
    total = passed + b.lacks(dtype)
    if not total:
        return Cell("-", None, "num dim")
    lacking = ", ".join(f"{n} {kind}" for kind in LACK_KINDS if (n := b.lacks(dtype, kind)))
    figure = "-" if g is None else f"{g:.2f}×"
    if not lacking:
        return Cell(f"{figure} {total}/{total}", g, "num")
    return Cell(f"{figure} {passed}/{total}: {lacking}", g, "num warn")


def _speed(s: Speed | None) -> str:
    if s is not None and s.is_baseline:
        return "eager (baseline) 1.00×"
    return "-" if s is None else f"{s.backend} {s.speedup:.2f}× [{s.low:.2f}–{s.high:.2f}]"


def _verdict_cell(v: Verdict) -> Cell:
    if not v.ranked:
        failed = ", ".join(f"{c.get('backend')} {c.get('status')}" for c in v.others)
        return Cell(f"none passed ({failed})", "", "bad")
    if v.winner is not None:
        return Cell(v.text, v.winner.backend, "warn" if is_eager(v.winner.case) else "ok")
    return Cell(v.text, "tie", "warn tie")


def _why(v: Verdict, rec: Recommendation | None) -> Cell:
    """Folded: every passing backend with its interval, who did not pass, and the weighted pick's reason."""
    items = [f"<li>{esc(_speed(s))} ({esc(s.source)})</li>" for s in v.ranked]
    items += [f"<li>{esc(note)}</li>" for s in v.tied[1:] if (note := eager_moved_note(v.tied[0], s))]
    items += [f"<li>{esc(c.get('backend'))}: {esc(c.get('status'))} — {esc(str(c.get('reason') or '')[:200])}</li>"
              for c in v.others]
    if rec is not None and rec.backend:
        items.append(f"<li>weighted pick ({esc(rec.shown)}): {esc(rec.reason)}</li>")
    return Cell(f'<details class="why"><summary>why</summary><ul class="note">{"".join(items)}</ul></details>',
                None, raw=True)


VERDICT_NOTE = (
    "<style>#verdicts td.num{white-space:nowrap}</style>"
    '<p class="note">The fastest <b>wins</b> only when its 95% interval clears every other\'s, eager\'s exact 1× '
    "included (eager is the baseline each backend was timed beside), and it leads each by at least "
    f"{MIN_WIN_MARGIN_PCT:g}%: the intervals are taken within one run and leave out what changes from run to "
    f"run on a GPU. Else the verdict is a tie (\"tie within {MIN_WIN_MARGIN_PCT:g}%\" where only the margin "
    "makes it); a tie that takes in eager reads \"not distinguishable from eager\", and where no backend reaches "
    "eager it reads \"eager (baseline) fastest\". Where eager's own time moved by more than "
    f"{100 * EAGER_APART_REL:g}% between two backends' cases, their speedups carry that move: the faster must then "
    "also lead by the margin in their own times, else they tie (\"eager moved between cases\").</p>")


def verdict_table(verdicts_: list[Verdict], recs: list[Recommendation], several_runs: bool) -> str:
    """Per workload/shape/dtype: the verdict (Verdict.text: the winner, eager, or a tie), the fastest speedup
    with its interval, its margin over the runner-up, the runner-up, the weighted pick."""
    by_key = {(r.run_label, r.workload, r.shape, r.dtype): r for r in recs}
    headers = (["run"] if several_runs else []) + [
        "workload", "shape", "dtype", "verdict", "fastest × eager [95%]", "margin", "runner-up × eager [95%]",
        "weighted pick", ""]
    body = []
    for v in verdicts_:
        rec = by_key.get((v.run_label, v.workload, v.shape, v.dtype))
        top = v.ranked[0] if v.ranked else None
        runner = v.ranked[1] if len(v.ranked) > 1 else None
        row = [Cell(v.run_label)] if several_runs else []
        row += [Cell(v.workload, v.workload), Cell(v.shape, v.shape), Cell(v.dtype, v.dtype), _verdict_cell(v),
                Cell(_speed(top), top.speedup if top else None, "num"),
                Cell("-" if v.margin is None else f"{100 * (v.margin - 1):+.1f}%", v.margin, "num"),
                Cell(_speed(runner), runner.speedup if runner else None, "num"),
                Cell(rec.shown if rec else "-", rec.shown if rec else None,
                     "warn" if rec and rec.tied_with else ""), _why(v, rec)]
        body.append(row)
    return VERDICT_NOTE + table(headers, body, table_id="verdicts")
