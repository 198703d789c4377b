"""The regression rule over a history series (one metric of one case on one kind of device, run after run).

A point breaches when value / baseline > 1 + max(T, 3·MAD / baseline), where baseline is the median and MAD the
median absolute deviation of the series' previous (up to) 14 values before the breaches in a row that end it so
far. Points are judged in run order: while breaches continue, none of them enters a later baseline, so a step up
stays flagged run after run instead of raising its own baseline and widening its limit. The series recovers
when a value comes back within its limit; the breaches before that value were passing noise and count again
(keeping every breach out for good would leave only the lower values in the baseline, and plain noise would
ratchet into a regression). A step meant to stay is flagged until a change of settings starts a new baseline
(below). A compile time must also rise by at least COMPILE_ABS_S seconds over its baseline to breach (eager's
"compile" is its first call: milliseconds of jitter). A series is a regression when its last two points
breach, suspicious when only the last one does. A case whose status goes from ok to a failure (accuracy:
ok → mismatch) between its last two runs is flagged at once.

Only comparable points make a baseline (results/report/comparable.py: the same graph and options, and for
latency the same timing settings and method): after a change of settings a series starts a new baseline, and
its first points are not judged, so flipping flush_l2 is never a regression. A noisy latency point says so (the
headline's noise says nothing of a compile time or an error).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from bakeoff.results.report.comparable import incomparable
from bakeoff.results.report.envdiff import EnvChange, env_diff
from bakeoff.results.report.headline_facts import headline_noise_note

# T per metric: the minimum relative rise that counts. Errors vs fp64 are deterministic for fixed seeds (MAD 0),
# and a new summation order may move them by tens of percent harmlessly: there a rise must exceed 2×.
MIN_RISE = {"headline_ms": 0.05, "compile_warm_s": 0.10, "compile_s": 0.15, "err_rel_l2_vs_fp64": 1.0}
WINDOW = 14
MIN_BASELINE = 3  # fewer previous values than this: no judgement
# A compile time must also rise by this many seconds to breach (eager's "compile" is its first call: milliseconds
# of jitter); compare's default floor (compare.Thresholds.compile_abs_s) is this one.
COMPILE_ABS_S = 0.5
COMPILE_METRICS = ("compile_s", "compile_warm_s")
REASON_CHARS = 160  # a flag quotes at most this much of a reason


def clip(text: str, n: int = REASON_CHARS) -> str:
    """`text` cut to at most `n` characters at a word boundary, with an ellipsis where it was cut."""
    if len(text) <= n:
        return text
    cut = text[:n - 1]
    head = cut if text[n - 1] == " " else cut.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:") + "…"


@dataclass(frozen=True)
class Point:
    """One run's value of a series; `limit` is the ratio the value may reach, `breach` whether it exceeded it."""

    run_id: str
    started_at: Any
    value: float
    env: dict[str, Any]
    baseline: float | None = None
    limit: float | None = None
    breach: bool = False
    # The record's comparability and quality fields (digests, timing settings and method, seeds, noise).
    rec: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    note: str | None = None  # e.g. "not judged against 3 earlier run(s): timing settings differ: ..."
    metric: str = "headline_ms"

    @property
    def noise(self) -> str | None:
        """Why the point's headline was noisy (its own samples; the case's measurement in older records); None
        for any other metric: the headline's noise says nothing of a compile time or an error."""
        return headline_noise_note(self.rec) if self.metric == "headline_ms" else None


@dataclass(frozen=True)
class Flag:
    """A series' verdict: kind is 'regression', 'suspicious' or 'accuracy'/'status' (ok → failure)."""

    kind: str
    text: str
    env_changes: list[EnvChange] = field(default_factory=list)


def judge(points: list[Point], metric: str) -> list[Point]:
    """The points with baseline, limit and breach filled in by the rule above, in order: a point's baseline is
    drawn from the earlier comparable points, less the breaches since the last point within its limit."""
    t = MIN_RISE[metric]
    floor = COMPILE_ABS_S if metric in COMPILE_METRICS else 0.0
    out: list[Point] = []
    for p in points:
        other = [incomparable(metric, q.rec, p.rec) for q in out[-WINDOW:]]
        why = [w for ws in other for w in ws]
        note = f"not judged against {sum(map(bool, other))} earlier run(s): {sorted(set(why))[0]}" if why else None
        streak = 0  # the breaches in a row that end the series so far: kept out of the baseline
        while streak < len(out) and out[-1 - streak].breach:
            streak += 1
        prev = [q.value for q in out[:len(out) - streak] if not incomparable(metric, q.rec, p.rec)][-WINDOW:]
        base = statistics.median(prev) if len(prev) >= MIN_BASELINE else 0.0
        if base <= 0:
            out.append(replace(p, baseline=None, limit=None, breach=False, note=note, metric=metric))
            continue
        mad = statistics.median(abs(v - base) for v in prev)
        limit = 1 + max(t, 3 * mad / base)
        breach = p.value / base > limit and p.value - base >= floor
        out.append(replace(p, baseline=base, limit=limit, breach=breach, note=note, metric=metric))
    return out


def flag_series(points: list[Point]) -> Flag | None:
    """Regression when the last two judged points breach, suspicious when only the last one does. The flag
    names what changed in the environment where the breaches began."""
    if not points or not points[-1].breach:
        return None
    start = len(points) - 1
    while start > 0 and points[start - 1].breach:
        start -= 1
    before = points[start - 1] if start > 0 else None
    changes = env_diff(before.env, points[start].env) if before else []
    last = points[-1]
    assert last.baseline is not None and last.limit is not None  # a breach always has both
    rise = f"{last.value / last.baseline:.2f}× the baseline {last.baseline:.4g} (limit {last.limit:.2f}×)"
    noisy = [p.noise for p in points[start:] if p.noise]
    rests = f"; rests on {len(noisy)} noisy measurement(s): {clip(noisy[-1])}" if noisy else ""
    if len(points) - start >= 2:
        return Flag("regression", f"last {len(points) - start} runs breach: latest {last.value:.4g} is {rise}{rests}",
                    changes)
    return Flag("suspicious", f"last run breaches once: {last.value:.4g} is {rise}{rests}", changes)


def flag_status(statuses: list[tuple[str, dict[str, Any], str | None]]) -> Flag | None:
    """(status, environment, reason) of a case run after run: flag a pass → fail between the last two at once."""
    runs = [s for s in statuses if s[0] != "skipped"]
    if len(runs) < 2 or runs[-2][0] != "ok" or runs[-1][0] == "ok":
        return None
    kind = "accuracy" if runs[-1][0] == "mismatch" else "status"
    reason = f": {clip(runs[-1][2], 200)}" if runs[-1][2] else ""
    return Flag(kind, f"ok → {runs[-1][0]}{reason}", env_diff(runs[-2][1], runs[-1][1]))
