"""User weights (latency, compile, error) and the recommended backend per workload under them.

Each candidate (a backend whose case passed) is scored by a weighted sum of log ratios to the best candidate
of the same workload, shape and dtype: score = w_lat·ln(lat/lat_best) + w_compile·ln(compile/compile_best)
+ w_err·ln(err/err_best). Lower is better; 0 means best on every axis. Log ratios make the three axes
unit-free, so a weight says how much one factor of e on that axis matters. Compile is the graph's own time to
its first result (`data.first_result_s`).

The latency axis is the paired figure of the speedup column: lat = 1 / speedup_vs_eager, the backend's headline
(`data.headline_ms`: the figure measured the same way for every backend) over the headline of the eager
reference timed interleaved with it in the same worker (eager's own case: 1). Medians from different workers
are never set against each other, so load that hit one worker and not another cannot make the recommendation
contradict the speedups shown beside it. Where eager's own headline moved by more than `EAGER_APART_REL` between
the pick's case and the runner-up's, and their own headlines would not rank them the same, the two are named as
tied (`tied_with`) with the reason. Where a candidate of the group has no speedup (older or hand-made
records), the group is ranked by the headline itself. A recommendation whose pick or runner-up has a noisy
speedup (`speedup_quality`) says so. A pick that would lose to its runner-up somewhere within their speedups'
95% intervals (report/decision.py) is no pick: the recommendation names both as tied (`tied_with`).

Cold compile times are floored at COMPILE_FLOOR_S (1 s) before the ratio: eager's "compile" is its first call,
milliseconds, and without the floor a 10 s compile would cost 0.2·ln(10 s / 5 ms) ≈ 1.5, more than a 4×
speedup earns (ln 4 ≈ 1.4). With the floor, anything that compiles within a second ties with eager on that
axis, and a 10 s compile costs 0.2·ln 10 ≈ 0.46 by default: less than a 2× speedup earns (ln 2 ≈ 0.69).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bakeoff.results.report.data import case_key, first_result_s, fnum, headline_method, headline_ms, unit_roundoff
from bakeoff.results.report.decision import is_eager, speed_of
from bakeoff.results.report.headline_facts import (eager_and_own_ms, eager_moved_between, speedup_noise_note,
                                                   speedup_quality)

DEFAULT_WEIGHTS = {"latency": 1.0, "compile": 0.2, "error": 0.5}
# Compile times below this (seconds) count as this much in the score: a wait under a second is not worth
# telling apart, and eager's first-call milliseconds must not make every compiler look thousands of times
# slower to start.
COMPILE_FLOOR_S = 1.0


class WeightsError(ValueError):
    pass


def parse_weights(text: str | None, file: Path | None = None) -> dict[str, float]:
    """Weights from 'latency=1,compile=0.2,error=0.5' and/or a YAML file holding either that mapping or
    `report: {weights: {...}}`; the text overrides the file, both override the defaults."""
    weights = dict(DEFAULT_WEIGHTS)
    if file is not None:
        try:
            data = yaml.safe_load(file.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise WeightsError(f"{file}: cannot read weights: {exc}") from exc
        if isinstance(data, dict) and isinstance(data.get("report"), dict):
            data = data["report"].get("weights", {})
        if not isinstance(data, dict):
            raise WeightsError(f"{file}: expected a mapping latency/compile/error -> number")
        weights.update(_checked(data, str(file)))
    if text:
        pairs = {}
        for part in text.split(","):
            if "=" not in part:
                raise WeightsError(f"--weights: {part!r} is not NAME=NUMBER")
            k, v = part.split("=", 1)
            pairs[k.strip()] = v.strip()
        weights.update(_checked(pairs, "--weights"))
    return weights


def _checked(data: dict[str, Any], where: str) -> dict[str, float]:
    out = {}
    for k, v in data.items():
        if k not in DEFAULT_WEIGHTS:
            raise WeightsError(f"{where}: unknown weight {k!r}; known: {', '.join(DEFAULT_WEIGHTS)}")
        try:
            out[k] = float(v)
        except (TypeError, ValueError):
            raise WeightsError(f"{where}: weight {k}={v!r} is not a number") from None
        if not math.isfinite(out[k]) or out[k] < 0:
            raise WeightsError(f"{where}: weight {k} must be a finite number >= 0")
    return out


@dataclass(frozen=True)
class Recommendation:
    """The pick for one (workload, shape, dtype[, run]); `backend` None when nothing passed."""

    workload: str
    shape: str
    dtype: str
    run_label: str
    backend: str | None
    score: float | None
    reason: str
    noisy: tuple[str, ...] = ()  # the pick and the runner-up, those of them whose speedup was noisy
    tied_with: str | None = None  # the runner-up, when the pick's lead is inside the speedups' intervals

    @property
    def shown(self) -> str:
        """The pick as the report names it: 'none', the backend, or 'tie: pick, runner-up'."""
        if not self.backend:
            return "none"
        return f"tie: {self.backend}, {self.tied_with}" if self.tied_with else self.backend


def _axes(c: dict[str, Any], paired: bool = True) -> tuple[float, float, float] | None:
    """(latency, seconds to first result, error) of a passing case; latency relative to the interleaved eager
    (1 / speedup_vs_eager) when `paired`, else the headline ms."""
    comp, err = first_result_s(c), fnum(c.get("err_rel_l2_vs_fp64"))
    speedup = fnum(c.get("speedup_vs_eager"))
    lat = (1.0 / speedup if speedup is not None and speedup > 0 else None) if paired else headline_ms(c)
    if c.get("status") != "ok" or lat is None or lat <= 0:
        return None
    floor = 0.01 * unit_roundoff(c.get("dtype"))  # errors below 1% of it count as equal (log 0 is undefined)
    return lat, max(comp or 0.0, COMPILE_FLOOR_S), max(err or 0.0, floor)


def recommend(cases: list[dict[str, Any]], weights: dict[str, float], run_label: str = "") -> list[Recommendation]:
    """The best passing backend of each workload/shape/dtype in one run's cases, with the reason in words."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for c in cases:
        if c.get("status") != "skipped":
            groups.setdefault(case_key(c)[:3], []).append(c)
    out = []
    for (wl, shape, dtype), members in groups.items():
        passing = [c for c in members if c.get("status") == "ok"]
        paired = all((fnum(c.get("speedup_vs_eager")) or 0) > 0 for c in passing)
        scored = [(c, a) for c in members if (a := _axes(c, paired)) is not None]
        if not scored:
            failed = ", ".join(f"{c.get('backend')} {c.get('status')}" for c in members)
            out.append(Recommendation(wl, shape, dtype, run_label, None, None, f"no backend passed ({failed})"))
            continue
        best = [min(a[i] for _, a in scored) for i in range(3)]
        w = (weights["latency"], weights["compile"], weights["error"])
        ranked = sorted(((sum(w[i] * math.log(a[i] / best[i]) for i in range(3)), c, a) for c, a in scored),
                        key=lambda t: t[0])
        score, pick, axes = ranked[0]
        noisy = tuple(str(c.get("backend")) for _, c, _ in ranked[:2] if speedup_quality(c) == "noisy")
        tie = _inside_noise(ranked, weights["latency"]) if paired else None
        moved = _eager_moved(ranked, weights["latency"]) if paired else ""
        if moved and tie is None:
            tie = str(ranked[1][1].get("backend"))
        out.append(Recommendation(wl, shape, dtype, run_label, str(pick.get("backend")), score,
                                  _reason(pick, axes, ranked, members, weights) + _noise_note(ranked[:2])
                                  + moved + _slower_than_eager(pick, members), noisy, tie))
    return out


def _slower_than_eager(pick: dict[str, Any], members: list[dict[str, Any]]) -> str:
    """' — slower than eager (0.81×), ...' where the pick's latency loses to eager, timed beside it, and eager is
    not among the candidates (only the paired baseline): the weights chose among slower backends."""
    sp = fnum(pick.get("speedup_vs_eager"))
    if sp is None or sp >= 1 or any(is_eager(c) for c in members):
        return ""
    return f" — slower than eager ({sp:.2f}×), the baseline timed beside it, which the weights could not pick"


def _inside_noise(ranked: list, w_latency: float) -> str | None:
    """The runner-up's name when the pick, at the slow end of its speedup's 95% interval, scores no better
    than the runner-up at the fast end of its own; else None."""
    if len(ranked) < 2:
        return None
    (score, pick, _), (runner_score, runner, _) = ranked[0], ranked[1]
    sp, sr = speed_of(pick), speed_of(runner)
    if sp is None or sr is None:
        return None
    worst = score + w_latency * math.log(sp.speedup / sp.low)
    best_runner = runner_score - w_latency * math.log(sr.high / sr.speedup)
    return str(runner.get("backend")) if worst >= best_runner else None


def _eager_moved(ranked: list, w_latency: float) -> str:
    """' — eager's own headline moved 16% between ...' when eager's headline differs by more than EAGER_APART_REL
    between the pick's and the runner-up's cases and, scored on their own headlines (timed apart) instead of
    their speedups, the runner-up would score as well as the pick: the lead is eager's move, not theirs."""
    if len(ranked) < 2 or not eager_moved_between(ranked[0][1], ranked[1][1]):
        return ""
    (score, pick, axes), (runner_score, runner, runner_axes) = ranked[0], ranked[1]
    mine, theirs = headline_ms(pick), headline_ms(runner)
    if mine and theirs:
        own_lead = runner_score - score - w_latency * (math.log(runner_axes[0] / axes[0]) - math.log(theirs / mine))
        if own_lead > 0:
            return ""
    eager, own = eager_and_own_ms(pick, runner)
    return (f" — eager's own headline moved between {pick.get('backend')}'s and {runner.get('backend')}'s cases "
            f"({eager} ms), so their speedups carry it; their own headlines ({own} ms) do not rank them the same")


def _noise_note(decisive: list) -> str:
    """'; rests on noisy measurements: inductor (host load: ...)' when the pick or the runner-up was noisy."""
    notes = [f"{c.get('backend')} ({(speedup_noise_note(c) or 'noisy')[:160]})"
             for _, c, _ in decisive if speedup_quality(c) == "noisy"]
    return f" — rests on noisy measurements: {', '.join(notes)}" if notes else ""


def _reason(pick: dict[str, Any], axes: tuple[float, float, float], ranked: list, members: list,
            weights: dict[str, float]) -> str:
    _, comp, err = axes
    lat = headline_ms(pick)
    parts = [f"{lat:.3g} ms ({headline_method(pick) or 'method not recorded'})" if lat is not None else "latency -"]
    sp = fnum(pick.get("speedup_vs_eager"))
    if sp is not None and pick.get("adapter", pick.get("backend")) != "eager":
        parts.append(f"{sp:.2f}× eager's speed (timed beside it)")
    comp = first_result_s(pick) or comp  # the measured time, not the score's floored one
    warm = fnum(pick.get("compile_warm_total_s")) or fnum(pick.get("compile_warm_s"))
    parts.append(f"first result {comp:.3g} s after a cold start" + (f" ({warm:.3g} s warm)" if warm is not None
                                                                     else ""))
    be = fnum(pick.get("break_even_calls"))
    if be is not None:
        parts.append(f"pays back its compile after {be:,.0f} calls")
    ratio = fnum(pick.get("err_ratio_vs_eager"))
    parts.append(f"error vs fp64 {err:.2g}" + (f" ({ratio:.2g}× eager's)" if ratio is not None else ""))
    text = f"{pick.get('backend')}: " + ", ".join(parts)
    if len(ranked) > 1:
        runner_score, runner, _ = ranked[1]
        text += f"; next {runner.get('backend')} (score {runner_score:.2f} vs {ranked[0][0]:.2f})"
    methods = {headline_method(c) for _, c, _ in ranked}
    if len(methods) > 1:
        text += f"; latencies of different methods compared ({', '.join(sorted(methods))})"
    failed = [f"{c.get('backend')} {c.get('status')}" for c in members if c.get("status") != "ok"]
    if failed:
        text += f"; excluded: {', '.join(failed)}"
    return text + " — weights " + ", ".join(f"{k}={v:g}" for k, v in weights.items())
