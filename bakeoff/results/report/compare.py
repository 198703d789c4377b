"""Compare two runs case by case: latency (Mann-Whitney U on the raw samples plus a minimum change), the speedup
over eager, compile time cold and warm, numeric error, status, cases the candidate lacks, and what changed in the
environment.

The clock: where both sides have an SM clock, latency is also compared in cycle space (time × clock; nvbench keeps
the SM clock beside its times for this): a latency change that would count, but whose cycles moved by less than
the minimum change, is the clock's doing, verdict "clock", never a regression or an improvement. The time-space
figure stays beside it. A side's clock is the median over the headline's samples, else (records written before
it) NVML's median over the timing window, labelled "(NVML)" (compare_latency.py). Memory-bound calls do not
follow the SM clock, so for them this can only spare a change that coincided with a clock change of the same
size. The CPU: time space alone.

Noise: a latency regression where either side's headline is noisy, by a reason that can move the headline's method
(compare_latency.latency_noise: never host load beside a device-timed span), is "suspect": still counted (a real
regression measured under load must not pass), and said apart with its reasons.

The speedup over eager (eager timed interleaved, in one process, at the same clock) is judged by the same minimum
change; where both records carry its 95% interval and the intervals overlap, the change is not significant. It
is shown, never counted: eager's own change (a new torch) moves every speedup. Where the latency moved but the
speedup stayed within the minimum change, the latency carries a note saying so: eager, timed beside the backend
at the same clock, moved alike, which points at what both share (the GPU's clock) rather than the backend.

Noise floors: a compile time must move by the relative minimum AND by at least `compile_abs_s` seconds (0.5 s by
default; eager's "compile" is its first call, milliseconds, so its jitter is never a regression), and errors vs
fp64 below `error_floor` unit roundoffs of the case's dtype count as that floor (so 0 → 1e-7 in float32 is no
regression: both are rounding-level)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from scipy.stats import mannwhitneyu

from bakeoff.results.report.comparable import incomparable
from bakeoff.results.report.compare_latency import (clock_text, latency_clock, latency_kcycles, latency_noise,
                                                    latency_noise_notes)
from bakeoff.results.report.data import RunData, case_key, fnum, headline_samples, metric_value, unit_roundoff
from bakeoff.results.report.envdiff import EnvChange, env_diff
from bakeoff.results.report.headline_facts import intervals_overlap, speedup_interval, speedup_noise_note
from bakeoff.results.report.trend import COMPILE_ABS_S

COUNTED = ("regressed", "suspect")  # the metric verdicts that make a case a regression (exit 1)


@dataclass(frozen=True)
class Thresholds:
    """Minimum relative changes (0.05 = 5%) that count, the significance level for latency, the factor by
    which error vs fp64 must grow to count, and the absolute noise floors: a compile time change must also be
    at least `compile_abs_s` seconds, and errors below `error_floor` × the dtype's unit roundoff count as
    equal to that floor."""

    latency: float = 0.05
    compile_warm: float = 0.10
    compile_cold: float = 0.15
    alpha: float = 0.01
    error_factor: float = 2.0
    compile_abs_s: float = COMPILE_ABS_S
    error_floor: float = 1.0



@dataclass(frozen=True)
class MetricChange:
    """One metric of one case. `rel` = candidate / base − 1; `p_value` only for latency (two-sided U test);
    verdict: regressed, improved, unchanged, not significant (changed by more than the minimum but p ≥ alpha,
    or the speedup's 95% intervals overlap), clock (a latency change the SM clock explains), suspect (a latency
    regression where a side's headline is noisy: `why`; counted like regressed), rose / fell (the speedup, never
    counted), not comparable (the two records measured different things: `why`; never a regression). Latency
    carries each side's SM clock (MHz) with its source (compare_latency: "headline" or "NVML") and `cycles_rel`,
    the change of time × clock, where both sides have one, and `note` where the speedup over eager held while it
    moved; the speedup its 95% intervals, where both have them."""

    metric: str
    base: float | None
    candidate: float | None
    rel: float | None
    verdict: str
    p_value: float | None = None
    why: str | None = None
    base_clock_mhz: float | None = None
    candidate_clock_mhz: float | None = None
    cycles_rel: float | None = None
    base_interval: tuple[float, float] | None = None
    candidate_interval: tuple[float, float] | None = None
    base_clock_source: str | None = None
    candidate_clock_source: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class CaseComparison:
    """A case present in both runs (same workload, shape, dtype, backend)."""

    key: tuple[str, str, str, str]
    base_status: str
    candidate_status: str  # "missing" when the candidate has no record of the case (a partial or killed run)
    # same, regressed (ok → failure, or missing from the candidate), fixed (failure → ok), changed (failure →
    # other failure), missing (absent from the candidate, not counted: --allow-missing), not comparable (the
    # graph or the backend options differ: nothing of the case is counted)
    status_verdict: str
    changes: list[MetricChange] = field(default_factory=list)
    candidate_reason: str | None = None
    not_comparable: list[str] = field(default_factory=list)  # why the whole case is not comparable
    noisy: list[str] = field(default_factory=list)  # 'base: reasons', 'candidate: reasons' of noisy headlines

    @property
    def incomparable(self) -> bool:
        """The case, or one of its metrics, could not be compared."""
        return bool(self.not_comparable) or any(c.verdict == "not comparable" for c in self.changes)

    @property
    def regressed(self) -> bool:
        return self.status_verdict == "regressed" or any(c.verdict in COUNTED for c in self.changes)

    @property
    def suspect(self) -> bool:
        """A regression by suspect latency changes alone (a noisy headline): still counted, said apart."""
        return (self.regressed and self.status_verdict != "regressed"
                and not any(c.verdict == "regressed" for c in self.changes))

    @property
    def improved(self) -> bool:
        return not self.regressed and (self.status_verdict == "fixed" or any(c.verdict == "improved"
                                                                              for c in self.changes))

    @property
    def clock_explained(self) -> bool:
        """The latency changed, and the SM clock explains the change."""
        return any(c.verdict == "clock" for c in self.changes)


@dataclass(frozen=True)
class Comparison:
    base_run: dict[str, Any]
    candidate_run: dict[str, Any]
    thresholds: Thresholds
    cases: list[CaseComparison]
    only_base: list[tuple[str, str, str, str]]
    only_candidate: list[tuple[str, str, str, str]]
    env_changes: list[EnvChange]
    allow_missing: bool = False

    @property
    def matched(self) -> list[CaseComparison]:
        """Cases present in both runs."""
        return [c for c in self.cases if c.candidate_status != "missing"]

    @property
    def regressions(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.regressed]

    @property
    def same_fingerprint(self) -> bool:
        return self.base_run.get("fingerprint") == self.candidate_run.get("fingerprint")

    @property
    def with_itself(self) -> bool:
        """Base and candidate are the same run: every difference is zero by construction."""
        return self.base_run.get("run_id") == self.candidate_run.get("run_id")

    @property
    def not_comparable(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.incomparable]


def _status_verdict(base: str, cand: str) -> str:
    if base == cand:
        return "same"
    if base == "ok" and cand != "skipped":
        return "regressed"
    if cand == "ok":
        return "fixed"
    return "changed"


def _threshold_change(metric: str, base: Any, cand: Any, minimum: float, absolute: float = 0.0) -> MetricChange | None:
    """A change counts when it is at least `minimum` relative and at least `absolute` in the metric's unit."""
    b, c = fnum(base), fnum(cand)
    if b is None or c is None or b <= 0:
        return None
    rel = c / b - 1
    big = abs(c - b) >= absolute
    verdict = ("regressed" if rel >= minimum and big else ("improved" if rel <= -minimum and big else "unchanged"))
    return MetricChange(metric, b, c, rel, verdict)


def _latency_change(base: dict[str, Any], cand: dict[str, Any], t: Thresholds) -> MetricChange | None:
    """The headline latency: by the minimum change and the U test in time space, then in cycle space where both
    sides have a clock ("clock" where the clock explains the change), then "suspect" where a regression rests
    on a noisy headline (compare_latency.latency_noise)."""
    change = _threshold_change("headline_ms", metric_value(base, "headline_ms"), metric_value(cand, "headline_ms"),
                               t.latency)
    if change is None:
        return None
    xs, ys = headline_samples(base), headline_samples(cand)
    p = None
    if len(xs) >= 2 and len(ys) >= 2:
        p = float(mannwhitneyu(xs, ys, alternative="two-sided").pvalue) if xs != ys else 1.0
    verdict = change.verdict
    if verdict != "unchanged" and (p is None or p >= t.alpha):
        verdict = "not significant"
    change = _in_cycles(replace(change, verdict=verdict, p_value=p), base, cand, t)
    noise = latency_noise_notes(base, cand)
    if change.verdict == "regressed" and noise:
        return replace(change, verdict="suspect", why="noisy: " + "; ".join(noise))
    return change


def _in_cycles(change: MetricChange, base: dict[str, Any], cand: dict[str, Any], t: Thresholds) -> MetricChange:
    """`change` with each side's clock and the change in SM cycles where both sides have a clock; verdict
    "clock" where the time-space change would count but the cycles moved by less than the minimum."""
    (clock_b, source_b), (clock_c, source_c) = latency_clock(base), latency_clock(cand)
    if clock_b is None or clock_c is None or change.rel is None:  # the CPU: time space alone
        return change
    kc_b, kc_c = latency_kcycles(base, source_b), latency_kcycles(cand, source_c)  # each call's clock where recorded
    cycles_rel = kc_c / kc_b - 1 if kc_b and kc_c else (1 + change.rel) * clock_c / clock_b - 1
    verdict, why = change.verdict, change.why
    if verdict in ("regressed", "improved") and abs(cycles_rel) < t.latency:
        verdict = "clock"
        why = f"explained by the SM clock: {clock_text(clock_b, source_b)} → {clock_text(clock_c, source_c)}"
    return replace(change, verdict=verdict, why=why, base_clock_mhz=clock_b, candidate_clock_mhz=clock_c,
                   cycles_rel=cycles_rel, base_clock_source=source_b, candidate_clock_source=source_c)


def _speedup_held(changes: list[MetricChange], t: Thresholds) -> list[MetricChange]:
    """`changes` with a note on a latency that moved (by the minimum change) while the speedup over eager stayed
    within it: eager, timed interleaved at the same clock, moved alike."""
    by = {c.metric: c for c in changes}
    lat, sp = by.get("headline_ms"), by.get("speedup_vs_eager")
    if (lat is None or sp is None or lat.rel is None or sp.rel is None or sp.verdict != "unchanged"
            or lat.verdict in ("unchanged", "not comparable")):
        return changes
    note = (f"speedup over eager held ({sp.rel * 100:+.1f}%, within {t.latency:.0%}): eager, timed beside it "
            "at the same clock, moved alike")
    return [replace(c, note=note) if c is lat else c for c in changes]


def _speedup_change(base: dict[str, Any], cand: dict[str, Any], t: Thresholds) -> MetricChange | None:
    """The speedup over eager: rose / fell by the latency's minimum change, not significant where both 95%
    intervals exist and overlap; None for eager's own case (1 by definition) or without both speedups."""
    if cand.get("adapter") == "eager" or base.get("adapter") == "eager":
        return None
    change = _threshold_change("speedup_vs_eager", base.get("speedup_vs_eager"), cand.get("speedup_vs_eager"),
                               t.latency)
    if change is None:
        return None
    # _threshold_change reads a rise as "regressed"; a higher speedup is the backend gaining on eager
    verdict = {"regressed": "rose", "improved": "fell"}.get(change.verdict, change.verdict)
    ci_b, ci_c = speedup_interval(base), speedup_interval(cand)
    why = None
    if verdict != "unchanged" and ci_b is not None and ci_c is not None and intervals_overlap(ci_b, ci_c):
        verdict, why = "not significant", "the 95% intervals overlap"
    return MetricChange(change.metric, change.base, change.candidate, change.rel, verdict, None, why,
                        base_interval=ci_b, candidate_interval=ci_c)


def _error_change(base: dict[str, Any], cand: dict[str, Any], t: Thresholds) -> MetricChange | None:
    b, c = fnum(base.get("err_rel_l2_vs_fp64")), fnum(cand.get("err_rel_l2_vs_fp64"))
    if b is None or c is None:
        return None
    floor = t.error_floor * unit_roundoff(cand.get("dtype"))
    if max(b, c) <= 0 or (floor <= 0 and b == 0):
        return MetricChange("err_rel_l2_vs_fp64", b, c, None, "unchanged" if c <= 0 else "regressed")
    ratio = max(c, floor) / max(b, floor)
    verdict = "regressed" if ratio > t.error_factor else ("improved" if ratio < 1 / t.error_factor else "unchanged")
    return MetricChange("err_rel_l2_vs_fp64", b, c, ratio - 1, verdict)


def _comparable_only(change: MetricChange | None, base: dict[str, Any], cand: dict[str, Any]) -> MetricChange | None:
    """`change`, or the same values marked 'not comparable' with the reason when the records measured
    different things for this metric (COMPARABLE_BY)."""
    if change is None:
        return None
    # the speedup divides two headlines: comparable where they are
    why = incomparable("headline_ms" if change.metric == "speedup_vs_eager" else change.metric, base, cand)
    if not why:
        return change
    return replace(change, verdict="not comparable", why="; ".join(why))


def _noisy(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """'side latency: reasons' for each side whose headline latency is noisy (its own samples; the case's
    measurement for older records) and 'side speedup: reasons' for each whose speedup is (its paired ratios),
    where the two were judged apart; the candidate's first, as latency_noise_notes orders them."""
    out = []
    for side, rec in (("candidate", cand), ("base", base)):
        latency = "; ".join(latency_noise(rec)) or None  # only what can move the headline's method
        if rec.get("speedup_quality") is None:  # not judged apart: one note, as older stores have it
            out += [f"{side}: {latency}"] if latency is not None else []
            continue
        speedup = speedup_noise_note(rec)
        out += [f"{side} latency: {latency}"] if latency is not None else []
        out += [f"{side} speedup: {speedup}"] if speedup is not None else []
    return out


def compare_case(base: dict[str, Any], cand: dict[str, Any], t: Thresholds,
                 revisions: tuple[Any, Any] = (None, None)) -> CaseComparison:
    """One matched case. Metrics are compared only when both runs passed; a status change says the rest.
    A case whose graph or options differ is not comparable at all; a metric whose timing settings, method or
    inputs differ is listed as not comparable; neither is ever a regression. `revisions`: the harness revision
    of each run, to say why options with equal stored values differ."""
    bs, cs = str(base.get("status")), str(cand.get("status"))
    whole = incomparable("status", base, cand, revisions)  # the graph or the options (SAME_CASE)
    if whole:
        return CaseComparison(case_key(cand), bs, cs, "not comparable", [], cand.get("reason"), whole,
                              _noisy(base, cand))
    changes: list[MetricChange] = []
    if bs == "ok" and cs == "ok":
        found = [_latency_change(base, cand, t), _speedup_change(base, cand, t),
                 _threshold_change("compile_s", base.get("compile_s"), cand.get("compile_s"), t.compile_cold,
                                   t.compile_abs_s),
                 _threshold_change("compile_warm_s", base.get("compile_warm_s"), cand.get("compile_warm_s"),
                                   t.compile_warm, t.compile_abs_s),
                 _error_change(base, cand, t)]
        if base.get("cache_hit_warm") is True and cand.get("cache_hit_warm") is False:
            found.append(MetricChange("cache_hit_warm", 1.0, 0.0, None, "regressed"))
        changes = _speedup_held([c for c in (_comparable_only(c, base, cand) for c in found) if c is not None], t)
    return CaseComparison(case_key(cand), bs, cs, _status_verdict(bs, cs), changes,
                          cand.get("reason"), [], _noisy(base, cand))


def missing_case(base: dict[str, Any], allow: bool) -> CaseComparison:
    """A case of the base run that the candidate has no record of: a regression (the candidate run was cut short,
    or lost a case) unless `allow`."""
    return CaseComparison(case_key(base), str(base.get("status")), "missing", "missing" if allow else "regressed",
                          [], "no record in the candidate run: a partial or killed run?")


def compare_runs(base: RunData, cand: RunData, t: Thresholds = Thresholds(), allow_missing: bool = False
                 ) -> Comparison:
    """Every case of `cand` matched against `base` by (workload, shape, dtype, backend); then every case of
    `base` that `cand` lacks, as status "missing" (a regression unless `allow_missing`)."""
    b = {case_key(c): c for c in base.cases}
    c = {case_key(x): x for x in cand.cases}
    revisions = tuple(r.run.get("harness_rev") or r.env.get("harness_rev") for r in (base, cand))
    cases = [compare_case(b[k], c[k], t, revisions) for k in c if k in b]
    cases += [missing_case(b[k], allow_missing) for k in b if k not in c]
    return Comparison(base.run, cand.run, t, cases, [k for k in b if k not in c], [k for k in c if k not in b],
                      env_diff(base.env, cand.env), allow_missing)
