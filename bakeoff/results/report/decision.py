"""The decision a report leads with: per workload the fastest backend, its margin over the runner-up, and a tie
where it is not clearly faster; per backend a scoreboard (geomean speedup per dtype over the cases every
backend passed, wins, ties, failures, skips, cases not run, compile times).

Each speedup's 95% interval is the record's (`speedup_vs_eager_ci_low`/`_high`, taken at measurement time);
for older records without it, the same paired bootstrap over the stored samples (results/speedup_interval.py);
without samples, the honest fallback `SPREAD_RULE` (the widest ratio the p20–p80 ranges allow). Eager's own
speedup is 1 by definition, an exact interval.

Eager always takes part in a verdict: speedups are over eager timed beside each backend, so where eager is only
that paired baseline and not a listed backend, the verdict still holds it at exactly 1× (`BASELINE_SOURCE`). The
fastest (eager included) wins only when its interval clears every other's and it is at least
`MIN_WIN_MARGIN_PCT` faster than each; else the verdict is a tie naming everyone inside that reach, and a tie
that takes in eager says the backends are not distinguishable from eager. Where eager's own headline moved by more
than `EAGER_APART_REL` between the fastest's case and another's, their speedups carry that move: the fastest must
then also lead that one by the margin in their own headlines (timed apart), else the two tie.
"""
from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from bakeoff.results.report.data import RunData, case_key, first_result_s, fnum, headline_ms, run_labels
from bakeoff.results.report.headline_facts import eager_and_own_ms, eager_apart, eager_moved_between
from bakeoff.results.report.headline_facts import speedup_interval as stored_interval
from bakeoff.results.speedup_interval import case_speedup_interval

SPREAD_RULE = ("p20–p80: eager's p20 over the backend's p80 to eager's p80 over the backend's p20 (no paired "
               "samples stored)")
IntervalSource = str  # "bootstrap (stored)", "bootstrap (from samples)", "p20–p80", "exact" (eager), BASELINE_SOURCE
BASELINE_SOURCE = "exact: eager, the baseline timed beside each backend"
# The least a fastest backend must lead by, in percent of the runner-up's speedup, to win. The 95% intervals
# are bootstraps within one run: they leave out what moves between runs on a GPU (clocks, placement, the
# allocator, what the compiler chose), which is often a few percent, so a lead smaller than this is a tie
# however narrow the intervals.
MIN_WIN_MARGIN_PCT = 3.0
CaseKey = tuple[str, str]  # (workload, shape): one case of a dtype
LACK_KINDS = ("not run", "failed", "skipped")  # why a backend has no speedup for one of a dtype's cases


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

    @property
    def is_baseline(self) -> bool:
        """Eager held at 1× in a verdict where eager is not a listed backend (no case of its own)."""
        return self.source == BASELINE_SOURCE


def is_eager(case: dict[str, Any]) -> bool:
    return str(case.get("adapter") or case.get("backend")) == "eager"


def overlaps(top: Speed, other: Speed) -> bool:
    """Whether a slower speed's interval reaches the faster one's."""
    return other.high >= top.low


def within_margin(top: Speed, other: Speed) -> bool:
    """Whether the faster speed leads the slower by less than MIN_WIN_MARGIN_PCT."""
    return top.speedup < other.speedup * (1 + MIN_WIN_MARGIN_PCT / 100)


def eager_moved(top: Speed, other: Speed) -> bool:
    """Whether eager's own headline moved by more than EAGER_APART_REL between the two speeds' cases and the
    faster does not also lead by MIN_WIN_MARGIN_PCT in their own headlines (or one lacks a headline)."""
    if not eager_moved_between(top.case, other.case):
        return False
    mine, theirs = headline_ms(top.case), headline_ms(other.case)
    return not mine or not theirs or theirs < mine * (1 + MIN_WIN_MARGIN_PCT / 100)


def eager_moved_note(top: Speed, other: Speed) -> str:
    """'eager's own headline moved 16% between a's and b's cases (0.107 / 0.124 ms), so their speedups carry it;
    their own headlines 0.0896 / 0.0916 ms', or '' where eager's move does not tie them (`eager_moved`)."""
    if not eager_moved(top, other):
        return ""
    apart = eager_apart(top.case, other.case) or 0.0
    eager, ms = eager_and_own_ms(top.case, other.case)
    return (f"eager's own headline moved {100 * apart:.0f}% between {top.backend}'s and {other.backend}'s cases "
            f"({eager} ms), so their speedups carry it; their own headlines {ms} ms")


@dataclass(frozen=True)
class Verdict:
    """One (run, workload, shape, dtype): its passing speeds, fastest first, eager among them (its own case or,
    where it is only the paired baseline, a `BASELINE_SOURCE` speed at 1×), and who else ran."""

    run_label: str
    workload: str
    shape: str
    dtype: str
    ranked: tuple[Speed, ...]
    others: tuple[dict[str, Any], ...] = ()  # cases that did not pass (failed or skipped)

    @property
    def tied(self) -> tuple[Speed, ...]:
        """The fastest and every passing speed not clearly slower: its interval overlaps the fastest one's or
        the fastest leads it by under MIN_WIN_MARGIN_PCT. One entry when the fastest wins outright."""
        if not self.ranked:
            return ()
        top = self.ranked[0]
        return tuple(s for s in self.ranked
                     if s is top or overlaps(top, s) or within_margin(top, s) or eager_moved(top, s))

    @property
    def is_tie(self) -> bool:
        return len(self.tied) > 1

    @property
    def tie_by_margin(self) -> bool:
        """A tie that only the minimum margin makes for some member: its interval clears the fastest one's."""
        top, *rest = self.tied or (None,)
        return any(not overlaps(top, s) and within_margin(top, s) for s in rest)

    @property
    def tie_by_eager(self) -> bool:
        """A tie that eager's move between cases makes for some member (`eager_moved`)."""
        top, *rest = self.tied or (None,)
        return any(not overlaps(top, s) and not within_margin(top, s) for s in rest)

    @property
    def winner(self) -> Speed | None:
        """The fastest speed (eager's, when no backend beats it) when it wins outright; None on a tie or with
        nothing passing."""
        return self.ranked[0] if self.ranked and not self.is_tie else None

    @property
    def margin(self) -> float | None:
        """The fastest speedup over the runner-up's (1.08 = 8% faster); None with fewer than two passing."""
        return self.ranked[0].speedup / self.ranked[1].speedup if len(self.ranked) > 1 else None

    @property
    def text(self) -> str:
        """What the verdict says: the winning backend, 'eager (baseline) fastest', 'tie[ within 3%][ (eager moved
        between cases)]: a, b', 'not distinguishable from eager[ within 3%]: a', or 'none passed'."""
        if not self.ranked:
            return "none passed"
        if self.winner is not None:
            return "eager (baseline) fastest" if is_eager(self.winner.case) else self.winner.backend
        within = (f" within {MIN_WIN_MARGIN_PCT:g}%" if self.tie_by_margin else "") + (
            " (eager moved between cases)" if self.tie_by_eager else "")
        backends = [s.backend for s in self.tied if not is_eager(s.case)]
        if len(backends) < len(self.tied):
            return f"not distinguishable from eager{within}: {', '.join(backends)}"
        return f"tie{within}: {', '.join(backends)}"


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


def _baseline(workload: str, shape: str, dtype: str) -> Speed:
    case = {"workload": workload, "shape": shape, "dtype": dtype, "backend": "eager", "adapter": "eager",
            "status": "ok", "speedup_vs_eager": 1.0}
    return Speed(case, 1.0, 1.0, 1.0, BASELINE_SOURCE)


def verdicts(runs: list[RunData]) -> list[Verdict]:
    """One Verdict per (run, workload, shape, dtype), in the order the cases were stored; eager joins as the
    1× baseline wherever a backend passed and eager has no passing case of its own."""
    labels = run_labels(runs)
    out = []
    for r in runs:
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for c in r.cases:
            groups.setdefault(case_key(c)[:3], []).append(c)
        for (wl, shape, dtype), members in groups.items():
            speeds = [s for c in members if (s := speed_of(c)) is not None]
            if speeds and not any(is_eager(s.case) for s in speeds):
                speeds.append(_baseline(wl, shape, dtype))
            speeds.sort(key=lambda s: -s.speedup)
            others = tuple(c for c in members if c.get("status") != "ok")
            out.append(Verdict(labels[r.run_id], wl, shape, dtype, tuple(speeds), others))
    return out


def geomean(xs: Iterable[float]) -> float | None:
    """The geometric mean; None for no values."""
    logs = [math.log(x) for x in xs]
    return math.exp(sum(logs) / len(logs)) if logs else None


@dataclass
class BackendScore:
    """One backend's line of the scoreboard."""

    backend: str
    run_label: str = ""
    speedups: dict[str, dict[CaseKey, float]] = field(default_factory=dict)  # dtype -> case -> passing speedup
    lacking: dict[str, dict[str, int]] = field(default_factory=dict)  # dtype -> LACK_KINDS kind -> cases
    won: int = 0
    tied: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # status -> count
    skipped: dict[str, int] = field(default_factory=dict)  # reason class -> count
    cold_s: list[float] = field(default_factory=list)
    warm_s: list[float] = field(default_factory=list)
    cases: int = 0

    def geomean(self, dtype: str, over: Collection[CaseKey] | None = None) -> float | None:
        """Geomean speedup over the dtype's passing cases, only those in `over` when given."""
        xs = self.speedups.get(dtype) or {}
        return geomean(x for k, x in xs.items() if over is None or k in over)

    def geomean_over(self, cases: Collection[tuple[str, CaseKey]] | None) -> float | None:
        """Geomean speedup over its passing (dtype, case) pairs of all dtypes, only those in `cases` when given."""
        return geomean(x for d, xs in self.speedups.items() for k, x in xs.items() if cases is None or (d, k) in cases)

    def passed(self, dtype: str) -> int:
        return len(self.speedups.get(dtype) or {})

    def lacks(self, dtype: str, kind: str | None = None) -> int:
        """How many of the dtype's cases it has no speedup for (of one LACK_KINDS kind when given)."""
        counts = self.lacking.get(dtype) or {}
        return counts.get(kind, 0) if kind else sum(counts.values())

    def count_lacking(self, dtype: str, kind: str, n: int = 1) -> None:
        """Counts `n` more of the dtype's cases without a speedup, for the LACK_KINDS reason `kind`."""
        counts = self.lacking.setdefault(dtype, {})
        counts[kind] = counts.get(kind, 0) + n

    @property
    def cold_median_s(self) -> float | None:
        return statistics.median(self.cold_s) if self.cold_s else None

    @property
    def warm_median_s(self) -> float | None:
        return statistics.median(self.warm_s) if self.warm_s else None


@dataclass(frozen=True)
class Scoreboard:
    """The backends' lines, ranked, and the cases their geomeans are compared over."""

    backends: list[BackendScore]  # fastest first by the geomean over `ranked_over`, then by their own cases'
    common: dict[str, frozenset[CaseKey]]  # dtype -> the cases every backend with a passing one there passed
    ranked_over: frozenset[tuple[str, CaseKey]]  # (dtype, case) every backend with a passing case passed

    def common_geomean(self, b: BackendScore, dtype: str) -> float | None:
        """`b`'s geomean over the dtype's common cases: the figure the backends are compared by."""
        return b.geomean(dtype, self.common.get(dtype, frozenset()))


def scoreboard(verdicts_: list[Verdict], several_runs: bool = False) -> Scoreboard:
    """Per backend (with the run's label when several runs are shown) its figures over every verdict, ranked by
    the geomean over the cases, of every dtype, that all backends with a passing case passed."""
    board: dict[str, BackendScore] = {}
    dtype_cases: dict[tuple[str, str], set[CaseKey]] = {}  # (run label, dtype) -> its cases

    def score(case: dict[str, Any], label: str) -> BackendScore:
        name = f"{case.get('backend')} · {label}" if several_runs and label else str(case.get("backend"))
        return board.setdefault(name, BackendScore(name, label))

    for v in verdicts_:
        dtype_cases.setdefault((v.run_label, v.dtype), set()).add((v.workload, v.shape))
        _tally(v, score)
    for b in board.values():
        for (label, dtype), keys in dtype_cases.items():
            missing = len(keys) - b.passed(dtype) - b.lacks(dtype) if label == b.run_label else 0
            if missing > 0:
                b.count_lacking(dtype, "not run", missing)
    dtypes = {d for b in board.values() for d in b.speedups}
    common = {d: _all_passed(b.speedups.get(d) for b in board.values()) for d in dtypes}
    ranked_over = _all_passed({(d, k): x for d, xs in b.speedups.items() for k, x in xs.items()}
                              for b in board.values())
    ranked = sorted(board.values(), key=lambda b: (-(b.geomean_over(ranked_over) or 0.0),
                                                   -(b.geomean_over(None) or 0.0)))
    return Scoreboard(ranked, common, ranked_over)


def _all_passed(passing: Iterable[dict[Any, float] | None]) -> frozenset[Any]:
    """The keys common to every non-empty mapping of passing speedups."""
    sets = [frozenset(xs) for xs in passing if xs]
    return frozenset.intersection(*sets) if sets else frozenset()


def _tally(v: Verdict, score: Callable[[dict[str, Any], str], BackendScore]) -> None:
    """Adds one verdict's cases to their backends' lines (eager's baseline, not a listed backend, to none)."""
    tied = {id(s) for s in v.tied} if v.is_tie else set()
    for s in v.ranked:
        if s.is_baseline:
            continue
        b = score(s.case, v.run_label)
        b.cases += 1
        b.speedups.setdefault(v.dtype, {})[(v.workload, v.shape)] = s.speedup
        b.won += s is v.winner
        b.tied += id(s) in tied
        _compile_times(b, s.case)
    for c in v.others:
        b = score(c, v.run_label)
        b.cases += 1
        if c.get("status") == "skipped":
            b.count_lacking(v.dtype, "skipped")
            cls = reason_class(c.get("reason"))
            b.skipped[cls] = b.skipped.get(cls, 0) + 1
        else:
            b.count_lacking(v.dtype, "failed")
            b.failed[str(c.get("status"))] = b.failed.get(str(c.get("status")), 0) + 1


def _compile_times(b: BackendScore, case: dict[str, Any]) -> None:
    cold = first_result_s(case)
    warm = fnum(case.get("compile_warm_total_s")) or fnum(case.get("compile_warm_s"))
    if cold is not None:
        b.cold_s.append(cold)
    if warm is not None:
        b.warm_s.append(warm)


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
