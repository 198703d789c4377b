"""The decision a report leads with: per workload the fastest backend, its margin over the runner-up, and a tie
where their speedup intervals overlap; per backend a scoreboard (geomean speedup per dtype, wins, ties,
failures, skips, compile times).

Each speedup's 95% interval is the record's (`speedup_vs_eager_ci_low`/`_high`, taken at measurement time);
for older records without it, the same paired bootstrap over the stored samples (results/speedup_interval.py);
without samples, the honest fallback `SPREAD_RULE` (the widest ratio the p20–p80 ranges allow). Eager's own
speedup is 1 by definition, an exact interval.
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from bakeoff.results.report.data import RunData, case_key, first_result_s, fnum, run_labels
from bakeoff.results.report.headline_facts import speedup_interval as stored_interval
from bakeoff.results.speedup_interval import case_speedup_interval

SPREAD_RULE = ("p20–p80: eager's p20 over the backend's p80 to eager's p80 over the backend's p20 (no paired "
               "samples stored)")
IntervalSource = str  # "bootstrap (stored)", "bootstrap (from samples)", "p20–p80", "exact" (eager)


@dataclass(frozen=True)
class Speed:
    """One passing case's speedup over eager with its interval (`source` says how the interval was had)."""

    case: dict[str, Any]
    speedup: float
    low: float
    high: float
    source: IntervalSource

    @property
    def backend(self) -> str:
        return str(self.case.get("backend"))


@dataclass(frozen=True)
class Verdict:
    """One (run, workload, shape, dtype): its passing speeds, fastest first, and who else ran."""

    run_label: str
    workload: str
    shape: str
    dtype: str
    ranked: tuple[Speed, ...]
    others: tuple[dict[str, Any], ...] = ()  # cases that did not pass (failed or skipped)

    @property
    def tied(self) -> tuple[Speed, ...]:
        """Every passing backend whose interval overlaps the fastest one's (the fastest included); one entry
        when the fastest wins outright."""
        if not self.ranked:
            return ()
        top = self.ranked[0]
        return tuple(s for s in self.ranked if s is top or s.high >= top.low)

    @property
    def is_tie(self) -> bool:
        return len(self.tied) > 1

    @property
    def winner(self) -> Speed | None:
        """The fastest backend when its interval clears every other's; None on a tie or with nothing passing."""
        return self.ranked[0] if self.ranked and not self.is_tie else None

    @property
    def margin(self) -> float | None:
        """The fastest speedup over the runner-up's (1.08 = 8% faster); None with fewer than two passing."""
        return self.ranked[0].speedup / self.ranked[1].speedup if len(self.ranked) > 1 else None


def is_eager(case: dict[str, Any]) -> bool:
    return str(case.get("adapter") or case.get("backend")) == "eager"


def speed_of(case: dict[str, Any]) -> Speed | None:
    """The case's speedup and its interval, or None when it did not pass or has no speedup."""
    sp = fnum(case.get("speedup_vs_eager"))
    if case.get("status") != "ok" or sp is None or sp <= 0:
        return None
    if is_eager(case):
        return Speed(case, sp, sp, sp, "exact")
    stored = stored_interval(case)
    if stored is not None:
        return Speed(case, sp, min(stored[0], sp), max(stored[1], sp), "bootstrap (stored)")
    ci = case_speedup_interval(case)
    if ci is not None:
        return Speed(case, sp, min(ci[0], sp), max(ci[1], sp), "bootstrap (from samples)")
    return Speed(case, sp, *_spread_interval(case, sp), "p20–p80")


def _spread_interval(case: dict[str, Any], sp: float) -> tuple[float, float]:
    """SPREAD_RULE; the point itself when a percentile is missing (then nothing can be told apart but it)."""
    b20, b80 = fnum(case.get("headline_p20_ms")), fnum(case.get("headline_p80_ms"))
    e20, e80 = fnum(case.get("eager_headline_p20_ms")), fnum(case.get("eager_headline_p80_ms"))
    if None in (b20, b80, e20, e80) or not b20 or not b80:
        return sp, sp
    return min(sp, e20 / b80), max(sp, e80 / b20)  # type: ignore[operator]


def verdicts(runs: list[RunData]) -> list[Verdict]:
    """One Verdict per (run, workload, shape, dtype), in the order the cases were stored."""
    labels = run_labels(runs)
    out = []
    for r in runs:
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for c in r.cases:
            groups.setdefault(case_key(c)[:3], []).append(c)
        for (wl, shape, dtype), members in groups.items():
            speeds = [s for c in members if (s := speed_of(c)) is not None]
            speeds.sort(key=lambda s: -s.speedup)
            others = tuple(c for c in members if c.get("status") != "ok")
            out.append(Verdict(labels[r.run_id], wl, shape, dtype, tuple(speeds), others))
    return out


@dataclass
class BackendScore:
    """One backend's line of the scoreboard."""

    backend: str
    speedups: dict[str, list[float]] = field(default_factory=dict)  # dtype -> passing speedups
    won: int = 0
    tied: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # status -> count
    skipped: dict[str, int] = field(default_factory=dict)  # reason class -> count
    cold_s: list[float] = field(default_factory=list)
    warm_s: list[float] = field(default_factory=list)
    cases: int = 0

    def geomean(self, dtype: str) -> float | None:
        xs = self.speedups.get(dtype) or []
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None

    @property
    def cold_median_s(self) -> float | None:
        return statistics.median(self.cold_s) if self.cold_s else None

    @property
    def warm_median_s(self) -> float | None:
        return statistics.median(self.warm_s) if self.warm_s else None


def scoreboard(verdicts_: list[Verdict], several_runs: bool = False) -> list[BackendScore]:
    """Per backend (with the run's label when several runs are shown): its figures over every verdict, in
    order of its geomean speedup over all dtypes, fastest first."""
    board: dict[str, BackendScore] = {}

    def score(case: dict[str, Any], label: str) -> BackendScore:
        name = f"{case.get('backend')} · {label}" if several_runs and label else str(case.get("backend"))
        return board.setdefault(name, BackendScore(name))

    for v in verdicts_:
        tied = {id(s) for s in v.tied} if v.is_tie else set()
        for s in v.ranked:
            b = score(s.case, v.run_label)
            b.cases += 1
            b.speedups.setdefault(v.dtype, []).append(s.speedup)
            b.won += s is v.winner
            b.tied += id(s) in tied
            _compile_times(b, s.case)
        for c in v.others:
            b = score(c, v.run_label)
            b.cases += 1
            if c.get("status") == "skipped":
                cls = reason_class(c.get("reason"))
                b.skipped[cls] = b.skipped.get(cls, 0) + 1
            else:
                b.failed[str(c.get("status"))] = b.failed.get(str(c.get("status")), 0) + 1
    return sorted(board.values(), key=lambda b: -_overall(b))


def _compile_times(b: BackendScore, case: dict[str, Any]) -> None:
    cold = first_result_s(case)
    warm = fnum(case.get("compile_warm_total_s")) or fnum(case.get("compile_warm_s"))
    if cold is not None:
        b.cold_s.append(cold)
    if warm is not None:
        b.warm_s.append(warm)


def _overall(b: BackendScore) -> float:
    xs = [x for v in b.speedups.values() for x in v]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


# (pattern in the reason, its class): the first that matches names a skip's class on the scoreboard
REASON_CLASSES = ((r"not installed|no module named|cannot import", "not installed"),
                  (r"no cuda|no gpu|provider|device", "no device support"),
                  (r"dtype|not supported|unsupported", "unsupported"),
                  (r"timeout|time out", "timeout"))


def reason_class(reason: Any) -> str:
    """A short class of a skip's reason ('not installed', 'no device support', 'unsupported', ...); else the
    reason's first clause."""
    text = str(reason or "no reason given")
    for pattern, cls in REASON_CLASSES:
        if re.search(pattern, text, re.I):
            return cls
    return re.split(r"[(:;]", text)[0].strip()[:40] or "other"
