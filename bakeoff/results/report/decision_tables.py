"""The two tables a report leads with: the scoreboard (one line per backend) and the per-workload verdict (the
winner and its margin, or a tie), each reason one click away (report/decision.py computes them)."""
from __future__ import annotations

from bakeoff.results.report.decision import BackendScore, Speed, Verdict
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


def scoreboard_table(board: list[BackendScore], dtypes: list[str]) -> str:
    """Per backend: geomean speedup over eager per dtype, cases won, tied, failed and skipped (reason class),
    median cold and warm compile."""
    headers = (["backend"] + [f"geomean × {d}" for d in dtypes] +
               ["won", "tied", "failed", "skipped", "cold compile s (median)", "warm compile s (median)"])
    body = []
    for b in board:
        geo = [b.geomean(d) for d in dtypes]
        body.append([Cell(b.backend, b.backend)] +
                    [Cell("-" if g is None else f"{g:.2f}×", g, "num " + ("ok" if g and g > 1 else "")) for g in geo] +
                    [_num(b.won, "d"), _num(b.tied, "d"), _counts(b.failed), _counts(b.skipped),
                     _num(b.cold_median_s, ".3g"), _num(b.warm_median_s, ".3g")])
    return table(headers, body, table_id="scoreboard")


def _speed(s: Speed | None) -> str:
    return "-" if s is None else f"{s.backend} {s.speedup:.2f}× [{s.low:.2f}–{s.high:.2f}]"


def _verdict_cell(v: Verdict) -> Cell:
    if not v.ranked:
        failed = ", ".join(f"{c.get('backend')} {c.get('status')}" for c in v.others)
        return Cell(f"none passed ({failed})", "", "bad")
    if v.winner is not None:
        return Cell(v.winner.backend, v.winner.backend, "ok")
    return Cell("tie: " + ", ".join(s.backend for s in v.tied), "tie", "warn tie")


def _why(v: Verdict, rec: Recommendation | None) -> Cell:
    """Folded: every passing backend with its interval, who did not pass, and the weighted pick's reason."""
    items = [f"<li>{esc(_speed(s))} ({esc(s.source)})</li>" for s in v.ranked]
    items += [f"<li>{esc(c.get('backend'))}: {esc(c.get('status'))} — {esc(str(c.get('reason') or '')[:200])}</li>"
              for c in v.others]
    if rec is not None and rec.backend:
        items.append(f"<li>weighted pick ({esc(rec.shown)}): {esc(rec.reason)}</li>")
    return Cell(f'<details class="why"><summary>why</summary><ul class="note">{"".join(items)}</ul></details>',
                None, raw=True)


def verdict_table(verdicts_: list[Verdict], recs: list[Recommendation], several_runs: bool) -> str:
    """Per workload/shape/dtype: the winner (or 'tie: ...' when the leaders' 95% intervals overlap), its
    speedup with the interval, its margin over the runner-up, the runner-up, the weighted pick."""
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
    return table(headers, body, table_id="verdicts")
