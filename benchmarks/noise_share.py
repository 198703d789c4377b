"""How many ok cases the noise rules mark, per backend: as stored, and re-judged from the stored samples by this
revision's rules (harness/measure/noise.py), for the mark beside the speedup and for the latency.

    python benchmarks/noise_share.py sqlite:///results/bakeoff.db [sqlite:///other.db ...] [--run-id ID ...]
                                     [--reasons]

Columns per backend: ok cases; `stored ~`, the cases whose stored mark is noisy (`headline_quality`, else
`measurement_quality`); `speedup ~`, re-judged: `speedup_quality` for a case with eager interleaved beside it,
the latency's for eager's own cases (the mark the terminal puts after the speedup or "baseline"); `latency ~`,
the re-judged `headline_quality` of the absolute latency, and how many of those the SM clock can account for.
A run stored in several stores is counted once. `--reasons` lists the re-judged speedup reasons of each marked
case. `--siblings`: take every process NVML saw on the GPU to be a gated worker of the run (`gated_sibling`), for
stores written before workers told them apart, from runs on a machine that ran nothing else. Records written before `headline_sm_clock_low_share` and `headline_sm_clock_mhz_max` existed are judged
with what they have (any clock reading 10% under the median is a latency reason; the timing window's highest
clock stands in for the headline's).
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bakeoff.harness.config.timing import TimingConfig  # noqa: E402
from bakeoff.harness.measure.noise import assess  # noqa: E402
from bakeoff.results.report.headline_facts import headline_quality  # noqa: E402
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
        c["clock"] += q["headline_quality"] == "noisy" and any("SM clock moved" in r or "the clock accounts for it" in r
                                                               for r in q["headline_noise_reasons"])
        if reasons and mark == "noisy":
            why = q["speedup_noise_reasons"] if q["speedup_quality"] else q["headline_noise_reasons"]
            notes.append(f"  {rec.get('backend')} {rec.get('workload')} {rec.get('dtype')}: {'; '.join(why)[:300]}")
    pct = lambda n, d: f"{n:3d} ({n / d:4.0%})"  # noqa: E731
    lines = [f"{'backend':12s} {'ok':>4s} {'stored ~':>11s} {'speedup ~':>11s} {'latency ~':>11s} {'(clock)':>8s}"]
    for name, c in sorted(counts.items()):
        lines.append(f"{name:12s} {c['ok']:4d} {pct(c['stored'], c['ok']):>11s} {pct(c['speedup'], c['ok']):>11s} "
                     f"{pct(c['latency'], c['ok']):>11s} {c['clock']:8d}")
    return "\n".join(lines + notes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("urls", nargs="+", help="store URLs (sqlite:///path.db)")
    ap.add_argument("--run-id", action="append", default=[], help="only these runs (repeatable)")
    ap.add_argument("--reasons", action="store_true", help="list the reasons of each case marked after re-judging")
    ap.add_argument("--siblings", action="store_true", help="every process NVML saw is a gated worker of the run "
                    "(stores from before gated_sibling, a machine that ran nothing else)")
    args = ap.parse_args(argv)
    records = load(args.urls, args.run_id)
    if args.siblings:
        records = [dict(r, gpu_other_processes=[dict(p, gated_sibling=True) for p in r["gpu_other_processes"]])
                   if r.get("gpu_other_processes") else r for r in records]
    if not records:
        print("no ok records in those stores", file=sys.stderr)
        return 1
    print(table(records, args.reasons))
    return 0


if __name__ == "__main__":
    sys.exit(main())
