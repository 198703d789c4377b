"""How many ok cases the noise rules mark, per backend: as stored, and re-judged from the stored samples by this
revision's rules (harness/measure/noise.py), for the mark beside the speedup and for the latency.

    python benchmarks/noise_share.py sqlite:///results/bakeoff.db [sqlite:///other.db ...] [--run-id ID ...]
                                     [--reasons]

Columns per backend: ok cases; `stored ~`, the cases whose stored mark is noisy (`headline_quality`, else
`measurement_quality`); `speedup ~`, re-judged: `speedup_quality` for a case with eager interleaved beside it,
the latency's for eager's own cases (the mark the terminal puts after the speedup or "baseline"); `latency ~`,
the re-judged `headline_quality` of the absolute latency, noisy; `(clock named)`, how many of those have a reason
that names the SM clock (NVML's range over the samples, or a series the per-call clocks account for beside one
they do not); `at clock`, the cases whose latency is `clock`: every reason accounted for by the clock read on
the device around each call (steady in SM cycles), not counted as noisy.
A run stored in several stores is counted once. `--reasons` lists the re-judged speedup reasons of each marked
case. `--siblings`: take every process NVML saw on the GPU to be a gated worker of the run (`gated_sibling`), for
stores written before workers told them apart, from runs on a machine that ran nothing else. Records written before `headline_sm_clock_low_share` and `headline_sm_clock_mhz_max` existed are judged
with what they have (any clock reading 10% under the median is a latency reason; the timing window's highest
clock stands in for the headline's).

`--across-cases` prints instead, per run and (workload, shape, dtype), eager's headline as measured in each case
of the run: its own case's headline, and the interleaved eager reference of every other backend's case
(`eager_headline_ms`). Their spread, largest / smallest - 1, in ms and in SM cycles: each call's span times the
clock read on the device where the record has such per-call clocks (`device_span_sm_clock_mhz`, the PM sampler's
over each call or the marker spins' around it, the reference's `eager_device_span_sm_clock_mhz`;
results/call_clocks.py), else the headline times the median clock over its samples
(`headline_sm_clock_mhz_median`); "-" where a case has no clock (older stores). A group holds when its
spread in ms is at most ACROSS_CASES_LIMIT (3%), or when its spread in cycles is (the clock accounts for it).
Beside it: each case's clock (its cycles over its ms) for the fastest and the slowest case, and the rank
correlation of the cases' ms with their clocks (`order`): near -1 says eager ran slower exactly where the clock
was lower (on a power-capped GPU the clock of a case follows the power its pair of kernels draws), even where the
cycles do not hold (a clock read at the calls' edges is not the clock inside a kernel the power cap slows).
A call is seldom all cycles: a block's GEMMs slow with the SM clock, its memory-bound kernels do not (the memory
keeps its clock), so its time spreads less than its clock and its cycles spread too. Where neither holds, the
group is fitted as ms = a / MHz + b (a, b >= 0, at least FIT_MIN_CASES cases, `clock_fit`): it holds by the fit
(`fit`: the spread of ms over the fitted, and the share of the time the clock drives) when the cases' ms lie
within 3% of the fit and follow their clocks' order closely (`order` at most FIT_ORDER, -0.8).
A group over in all is said to keep "each case its own time" where the cases' medians lie further apart than
OWN_TIME_SE (4) standard errors of the least certain one (from its samples' IQR) and the clock cannot be why:
their times do not follow their clocks' order (`order` above CLOCK_ORDER, or unknown), or they spread more than
the clocks themselves (by over 3%; a call's time scales at most as 1 / clock). Then neither the samples' noise
nor a clock explains it; each worker process kept a time of its own (a memory-bound kernel's time in one process
against another's). On an H100 that was eager's 16-bit RMSNorm, whose time follows where its input lies in device
memory, which each worker's earlier allocations decide (`address_check.py` times it at other addresses).
"""
from __future__ import annotations

import argparse
import collections
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize, stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bakeoff.harness.config.timing import TimingConfig  # noqa: E402
from bakeoff.harness.measure.noise import assess  # noqa: E402
from bakeoff.results.call_clocks import DEVICE_SOURCES, PM_SOURCE, per_call_clocks, span_kcycles  # noqa: E402
from bakeoff.results.report.headline_facts import headline_clock_mhz, headline_kcycles, headline_quality  # noqa: E402
from bakeoff.results.store import Store  # noqa: E402


def rejudge(rec: dict[str, Any]) -> dict[str, Any]:
    """assess() of a flat stored record, with the case's own target and pairing."""
    target = (rec.get("timing_settings") or {}).get("target_iqr", TimingConfig().target_iqr)
    events = str(rec.get("timing_method") or "").startswith("cuda-events")
    host_clock = not (str(rec.get("device") or "").startswith("cuda") and events)
    return assess(rec, float(target), paired=rec.get("adapter") != "eager", host_clock=host_clock)


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    return {**{k: v for k, v in row.items() if k != "details"}, **(row.get("details") or {})}


def load(urls: list[str], run_ids: list[str]) -> list[dict[str, Any]]:
    """The ok records of every run in `urls` (or only `run_ids`), each run once."""
    out, seen = [], set()
    for url in urls:
        store = Store(url)
        for run in store.runs():
            rid = run["run_id"]
            if rid in seen or (run_ids and rid not in run_ids):
                continue
            seen.add(rid)
            out += [r for r in map(_flat, store.records(rid)) if r.get("status") == "ok"]
    return out


def table(records: list[dict[str, Any]], reasons: bool) -> str:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    notes = []
    for rec in records:
        q, c = rejudge(rec), counts[str(rec.get("backend"))]
        c["ok"] += 1
        c["stored"] += headline_quality(rec) == "noisy"
        mark = q["speedup_quality"] or q["headline_quality"]
        c["speedup"] += mark == "noisy"
        c["latency"] += q["headline_quality"] == "noisy"
        c["clock named"] += q["headline_quality"] == "noisy" and any(
            "SM clock moved" in r or "the clock accounts for it" in r for r in q["headline_noise_reasons"])
        c["at clock"] += q["headline_quality"] == "clock"
        if reasons and mark == "noisy":
            why = q["speedup_noise_reasons"] if q["speedup_quality"] else q["headline_noise_reasons"]
            notes.append(f"  {rec.get('backend')} {rec.get('workload')} {rec.get('dtype')}: {'; '.join(why)[:300]}")
    pct = lambda n, d: f"{n:3d} ({n / d:4.0%})"  # noqa: E731
    lines = [f"{'backend':12s} {'ok':>4s} {'stored ~':>11s} {'speedup ~':>11s} {'latency ~':>11s} "
             f"{'(clock named)':>13s} {'at clock':>11s}"]
    for name, c in sorted(counts.items()):
        lines.append(f"{name:12s} {c['ok']:4d} {pct(c['stored'], c['ok']):>11s} {pct(c['speedup'], c['ok']):>11s} "
                     f"{pct(c['latency'], c['ok']):>11s} {c['clock named']:13d} {pct(c['at clock'], c['ok']):>11s}")
    return "\n".join(lines + notes)


ACROSS_CASES_LIMIT = 0.03
# A group over in ms and in cycles whose cases' medians lie further apart than OWN_TIME_SE standard errors of the
# least certain median: not the samples' noise, not the clock: each case (a worker process) kept a time of its own.
OWN_TIME_SE = 4.0
CLOCK_ORDER = -0.5  # at or under it, the cases' times follow their clocks' order: that, not the process, is said
# A call is part clock-bound (cycles: its time scales as 1 / clock) and part not (memory, which the SM clock does
# not drive): ms = a / MHz + b, a and b >= 0, fitted over a group's cases, needs this many cases (two left over).
FIT_MIN_CASES = 4
# ... and the cases' times must fall as their clocks rise, case by case, at least this closely (rank correlation):
# on made-up groups of 4-5 times and clocks drawn apart (times 6-20% apart, clocks 1,300-2,000 MHz), the fit then
# holds 0.3-3.5% of them, against 1-13% at CLOCK_ORDER.
FIT_ORDER = -0.8


def _eager_kcycles(rec: dict[str, Any]) -> float | None:
    """The interleaved eager reference's headline in thousands of SM cycles: the median of each profiled call's
    span x its clock read on the device (results/call_clocks.py), else its headline x the median clock over the
    case's headline samples (eager's and the backend's, interleaved); None without a clock."""
    kcycles = span_kcycles(rec, "eager_")
    if kcycles is not None:
        return kcycles
    ms, mhz = rec.get("eager_headline_ms"), headline_clock_mhz(rec)
    return float(ms) * mhz if ms and mhz is not None else None


def eager_measurements(records: list[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    """Per (run, workload, shape, dtype, grad): eager's headline in each case that measured it, as
    {"case": backend label ("eager" for its own case), "ms", "kcycles" (None without a clock), "clock": the
    source of each call's own clock ("pm-sampler", "marker-spin"), "median" (the median clock over the headline's
    samples) or None}."""
    groups: dict[tuple, list[dict[str, Any]]] = collections.defaultdict(list)
    for rec in records:
        key = (rec.get("run_id"), rec.get("workload"), rec.get("shape"), rec.get("dtype"), bool(rec.get("grad")))
        own = rec.get("adapter", rec.get("backend")) == "eager"
        if own:
            ms, kcycles = rec.get("headline_ms"), headline_kcycles(rec)
        else:
            ms, kcycles = rec.get("eager_headline_ms"), _eager_kcycles(rec)
        prefix = "" if own else "eager_"
        per_call = per_call_clocks(rec, prefix) is not None
        clock = None if kcycles is None else (rec[f"{prefix}device_span_sm_clock_source"] if per_call else "median")
        if ms:
            groups[key].append({"case": str(rec.get("backend")), "ms": float(ms), "kcycles": kcycles, "clock": clock,
                                "mhz": None if kcycles is None else kcycles / float(ms),
                                "median_se": _median_se(rec.get(f"{prefix}device_span_samples_ms"))})
    return groups


def _median_se(samples: list[float] | None) -> float | None:
    """The standard error of the samples' median over the median, from their interquartile range as a normal
    spread's (IQR / 1.349 sigma, median SE 1.2533 sigma / sqrt(n)); None under four samples."""
    if not samples or len(samples) < 4:
        return None
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    return float(1.2533 * (q3 - q1) / 1.349 / math.sqrt(len(samples)) / median) if median > 0 else None


def spread(values: list[float]) -> float | None:
    """largest / smallest - 1; None with fewer than two values or a non-positive one."""
    return max(values) / min(values) - 1.0 if len(values) >= 2 and min(values) > 0 else None


def rank_correlation(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation of two equally long series (ties share their mean rank); None under three
    values or where either series is constant."""
    if len(xs) < 3:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)  # a constant series: NaN, said as None below
        rho = float(stats.spearmanr(xs, ys).statistic)
    return None if math.isnan(rho) else rho


def clock_fit(ms: list[float], mhz: list[float]) -> tuple[float, float] | None:
    """Fit ms = a / MHz + b with a, b >= 0 (non-negative least squares) over a group's cases: `a` the calls'
    cycles the SM clock drives, `b` the time it does not (memory, whose clock stays). Returns (the clock's share of
    the time at the group's median clock, the spread of ms over the fit: largest / smallest - 1), or None under
    FIT_MIN_CASES cases. A share of 1 is time x clock (the cycles); 0, a time the clock has no part in."""
    if len(ms) < FIT_MIN_CASES:
        return None
    t, inv = np.asarray(ms, float), 1.0 / np.asarray(mhz, float)
    design = np.column_stack([inv, np.ones_like(inv)])
    (a, b), _ = optimize.nnls(design, t)
    fitted = design @ np.array([a, b])
    if min(fitted) <= 0:
        return None
    clocked = a / float(np.median(mhz))
    ratio = t / fitted
    return clocked / (clocked + b), float(ratio.max() / ratio.min() - 1.0)


def across_cases(records: list[dict[str, Any]], limit: float = ACROSS_CASES_LIMIT) -> list[dict[str, Any]]:
    """One row per group of eager_measurements with at least two cases: n, the cases of the fastest and slowest
    figure and their clocks (MHz: the cycles over the ms), spread_ms and spread_kcycles (None unless every case has
    a clock), `clock_order`: the rank correlation of the cases' ms with their clocks (-1: the lower a case's
    clock, the slower eager ran in it, case by case; None without every clock or under three cases), `holds`:
    "ms" (spread in ms within `limit`), "clock" (only in cycles), "fit" (only by clock_fit: a part of each call
    the clock drives and a part it does not, in the clocks' order), False (none of them), None (over in ms, no
    clocks to tell), `fit_share` and `fit_spread` (clock_fit's, None without it), `median_se` (the largest
    standard error of a case's median, relative) and `own_time` (over in all, a time per case: see the module's
    text)."""
    rows = []
    for (run_id, workload, shape, dtype, grad), got in sorted(eager_measurements(records).items(), key=str):
        if len(got) < 2:
            continue
        ms = [g["ms"] for g in got]
        cyc = [g["kcycles"] for g in got]
        spread_ms = spread(ms)
        spread_kc = spread(cyc) if all(c is not None for c in cyc) else None
        holds: str | bool | None = "ms" if spread_ms is not None and spread_ms <= limit else (
            None if spread_kc is None else ("clock" if spread_kc <= limit else False))
        ses = [g["median_se"] for g in got]
        median_se = max(ses) if None not in ses else None
        fastest, slowest = got[ms.index(min(ms))], got[ms.index(max(ms))]
        mhz = [g["mhz"] for g in got]
        order = rank_correlation(ms, [round(m) for m in mhz]) if None not in mhz else None
        fit = clock_fit(ms, mhz) if holds is False else None
        # time scales at most as 1 / clock: a spread in ms beyond the clocks' own is not the clock's
        beyond_clock = holds is False and (1.0 + spread_ms) / (1.0 + (spread(mhz) or 0.0)) - 1.0 > limit
        if (holds is False and fit is not None and fit[0] > 0 and fit[1] <= limit and order is not None
                and order <= FIT_ORDER + 1e-9):  # 4 cases order at -0.8 exactly, give or take a rounding
            holds = "fit"
        rows.append({"run_id": run_id, "workload": workload, "shape": shape, "dtype": dtype, "grad": grad,
                     "n": len(got), "fastest": fastest["case"], "slowest": slowest["case"],
                     "fastest_mhz": fastest["mhz"], "slowest_mhz": slowest["mhz"],
                     "clock_order": order,
                     "min_ms": min(ms), "max_ms": max(ms),
                     "spread_ms": spread_ms, "spread_kcycles": spread_kc,
                     "clocks": sum(c is not None for c in cyc),
                     "per_call_clocks": sum(g["clock"] in DEVICE_SOURCES for g in got),
                     "pm_clocks": sum(g["clock"] == PM_SOURCE for g in got), "holds": holds,
                     "fit_share": None if fit is None else fit[0], "fit_spread": None if fit is None else fit[1],
                     "median_se": median_se, "own_time": bool(holds is False and median_se is not None
                                                              and spread_ms >= OWN_TIME_SE * median_se
                                                              and (order is None or order > CLOCK_ORDER
                                                                   or beyond_clock))})
    return rows


def across_table(rows: list[dict[str, Any]], limit: float = ACROSS_CASES_LIMIT) -> str:
    pct = lambda x: "-" if x is None else f"{x:.1%}"  # noqa: E731
    order = lambda x: "-" if x is None else f"{x:+.1f}"  # noqa: E731
    mhz = lambda x: "" if x is None else f" {x:.0f}"  # noqa: E731
    clocks = lambda r: (f"{r['pm_clocks']}+{r['per_call_clocks'] - r['pm_clocks']}+"  # noqa: E731
                        f"{r['clocks'] - r['per_call_clocks']}/{r['n']}")
    lines = [f"{'workload':20s} {'dtype':9s} {'n':>2s} {'min ms':>9s} {'max ms':>9s} {'spread':>7s} "
             f"{'cycles':>7s} {'clocks':>7s} {'order':>5s} {'fit':>9s}  fastest / slowest case (MHz)  holds"]
    for r in rows:
        name = r["workload"] + (" (grad)" if r["grad"] else "")
        fit = "-" if r["fit_spread"] is None else f"{r['fit_spread']:.1%}/{r['fit_share']:.0%}"
        by_fit = "" if r["fit_share"] is None else (f"yes, the clock for {r['fit_share']:.0%} of the time, the "
                                                    "rest fixed")
        holds = {"ms": "yes", "clock": "yes, the clock accounts for it", None: "NO (no clocks)", "fit": by_fit,
                 False: "NO" + (f", each case its own time (medians' SE <= {r['median_se']:.1%})"
                                if r["own_time"] else "")}
        lines.append(f"{name:20s} {r['dtype']!s:9s} {r['n']:2d} {r['min_ms']:9.4g} {r['max_ms']:9.4g} "
                     f"{pct(r['spread_ms']):>7s} {pct(r['spread_kcycles']):>7s} "
                     f"{clocks(r):>7s} {order(r['clock_order']):>5s} {fit:>9s}  "
                     f"{r['fastest']}{mhz(r['fastest_mhz'])} / {r['slowest']}{mhz(r['slowest_mhz'])}  "
                     f"{holds[r['holds']]}")
    count = collections.Counter(r["holds"] for r in rows)
    own_time = sum(r["own_time"] for r in rows)
    lines.append(f"{len(rows)} groups: {count['ms']} within {limit:.0%} in ms, {count['clock']} more within it in "
                 f"SM cycles, {count['fit']} more within it of a part the clock drives and a fixed part, "
                 f"{count[False]} over in all ({own_time} of them a time per case: medians over "
                 f"{OWN_TIME_SE:g} standard errors apart that their clocks cannot account for), {count[None]} "
                 "over in ms without clocks to tell")
    lines.append("clocks: cases with each call's clock by the PM sampler + by the markers + cases with only the "
                 "median clock over the headline's samples / cases; order: rank correlation of the cases' ms with "
                 "their clocks (-1.0: the lower the clock, the slower, case by case); fit: ms over a / MHz + b "
                 "fitted over the cases (a, b >= 0), its spread / the clock-driven share of the time")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("urls", nargs="+", help="store URLs (sqlite:///path.db)")
    ap.add_argument("--run-id", action="append", default=[], help="only these runs (repeatable)")
    ap.add_argument("--reasons", action="store_true", help="list the reasons of each case marked after re-judging")
    ap.add_argument("--siblings", action="store_true", help="every process NVML saw is a gated worker of the run "
                    "(stores from before gated_sibling, a machine that ran nothing else)")
    ap.add_argument("--across-cases", action="store_true", help="eager's headline for the same (workload, dtype) "
                    "as measured in each case of a run: its spread in ms and in SM cycles")
    args = ap.parse_args(argv)
    records = load(args.urls, args.run_id)
    if args.siblings:
        records = [dict(r, gpu_other_processes=[dict(p, gated_sibling=True) for p in r["gpu_other_processes"]])
                   if r.get("gpu_other_processes") else r for r in records]
    if not records:
        print("no ok records in those stores", file=sys.stderr)
        return 1
    if args.across_cases:
        by_run = collections.defaultdict(list)
        for row in across_cases(records):
            by_run[row["run_id"]].append(row)
        for run_id, rows in by_run.items():
            print(f"run {run_id}: eager's headline across the cases that measured it\n{across_table(rows)}")
        return 0
    print(table(records, args.reasons))
    return 0


if __name__ == "__main__":
    sys.exit(main())
