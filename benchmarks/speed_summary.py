"""The closing tables of `benchmarks/gpu.sh suite`, from a run's exported records (`bakeoff export RUN`).

    python benchmarks/speed_summary.py RECORDS.json --run-s S [--run-log LOG] [--agreement JSON]
                                       [--agreement-log TXT] [--json OUT.json]

Prints per backend: cases, wall seconds per case, compile / timing / overhead shares and the largest overhead
phases; the run's overhead share and cases per minute (cases with a record over the run's wall time, `--run-s`);
statuses; the cache verification (cold compiles on empty caches with no hit, Inductor's own counter included;
warm compiles a verified hit); the gate policy of each case and why; the do_bench agreement. Writes the same
as JSON with --json.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bakeoff.harness.cli.overhead import elapsed_line, elapsed_split, overhead_phases, totals  # noqa: E402


def per_backend(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for label in sorted({r["backend"] for r in records}):
        mine = [r for r in records if r["backend"] == label]
        tot = totals(mine)
        if tot is None:
            continue
        w = tot["wall_s"]
        top = sorted(overhead_phases(mine).items(), key=lambda kv: -kv[1])[:4]
        rows.append({"backend": label, "cases": tot["cases"], "wall_s_per_case": w / tot["cases"],
                     "compile_share": tot["compile_s"] / w, "timing_share": tot["timing_s"] / w,
                     "overhead_share": tot["overhead_s"] / w,
                     "largest_overhead_s_per_case": {k: v / tot["cases"] for k, v in top}})
    return rows


def cache_check(records: list[dict[str, Any]]) -> dict[str, Any]:
    compiled = [r for r in records if r.get("compile_total_s") is not None]
    warm = [r for r in compiled if r.get("compile_warm_s") is not None]
    return {
        "cold_compiles": len(compiled),
        "cold_cache_not_empty": [r["case_id"] for r in compiled if (r.get("cache_files_before_cold") or 0) > 0],
        "cold_cache_hit": [r["case_id"] for r in compiled if r.get("cache_hit_cold")],
        "inductor_cold_counter_miss": sum(1 for r in compiled if r.get("adapter") == "inductor"
                                          and r.get("cache_hit_cold") is False),
        "inductor_cold": sum(1 for r in compiled if r.get("adapter") == "inductor"),
        "warm_compiles": len(warm),
        "warm_hit": dict(collections.Counter(str(r.get("cache_hit_warm")) for r in warm)),
        "warm_not_hit": [r["case_id"] for r in warm
                         if r.get("adapter") != "eager" and r.get("cache_hit_warm") is False],
        "worker_starts": dict(collections.Counter(f"{r.get('worker_start')}/{r.get('worker_start_warm', '-')}"
                                                  for r in records if r.get("worker_start"))),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("records")
    ap.add_argument("--run-s", type=float, required=True, help="wall seconds of the `bakeoff run` command")
    ap.add_argument("--run-log")
    ap.add_argument("--agreement")
    ap.add_argument("--agreement-log")
    ap.add_argument("--json")
    args = ap.parse_args()
    records = json.loads(Path(args.records).read_text())
    console = Console(width=150)
    rows = per_backend(records)
    table = Table("backend", "cases", "wall s/case", "compile %", "timing %", "overhead %",
                  "largest overhead phases, s/case", title="per backend", header_style="bold")
    for r in rows:
        top = ", ".join(f"{k} {v:.1f}" for k, v in r["largest_overhead_s_per_case"].items())
        table.add_row(r["backend"], str(r["cases"]), f"{r['wall_s_per_case']:.1f}", f"{100 * r['compile_share']:.0f}",
                      f"{100 * r['timing_share']:.0f}", f"{100 * r['overhead_share']:.0f}", top)
    console.print(table)
    tot = totals(records)
    ran = [r for r in records if r.get("wall_s")]
    summary: dict[str, Any] = {
        "cases_with_record": len(records), "cases_run": len(ran), "run_s": args.run_s,
        "cases_per_min": 60 * len(ran) / args.run_s if args.run_s > 0 else None,
        "overhead_share": tot["overhead_s"] / tot["wall_s"] if tot else None,
        # over the run's elapsed time (--run-s): no case compiling or timing (cli/overhead.py elapsed_split)
        "elapsed_split": elapsed_split(records, args.run_s) if args.run_s > 0 else None,
        "wall_s_per_case": tot["wall_s"] / tot["cases"] if tot else None,
        "statuses": dict(collections.Counter(r["status"] for r in records)),
        "per_backend": rows, "cache": cache_check(records),
        "gate_policies": dict(collections.Counter(f"{r.get('adapter')}: {r.get('gate_policy')} "
                                                  f"({r.get('gate_policy_reason')})" for r in ran)),
        # the latency's own mark (what the terminal's "~" shows), and the case's overall summary (host figures too)
        "headline_noisy": sum(1 for r in ran if r.get("headline_quality") == "noisy"),
        "case_summary_noisy": sum(1 for r in ran if r.get("measurement_quality") == "noisy"),
    }
    if args.run_log and Path(args.run_log).exists():
        summary["interrupted"] = "Resume with" in Path(args.run_log).read_text(errors="replace")
    console.print(f"overhead share {summary['overhead_share'] and round(summary['overhead_share'], 3)} (target 0.25); "
                  f"{summary['cases_run']} cases in {args.run_s:.0f} s = "
                  f"{summary['cases_per_min'] or 0:.2f} cases/min; "
                  f"wall {summary['wall_s_per_case'] or 0:.1f} s/case; headline noisy {summary['headline_noisy']} "
                  f"(case summary, host figures included: {summary['case_summary_noisy']}); "
                  f"run cut short: {summary.get('interrupted')}", highlight=False)
    if summary["elapsed_split"]:
        console.print(f"{elapsed_line(records, args.run_s)} (share {summary['elapsed_split']['overhead_share']:.3f}, "
                      "target 0.25)", highlight=False)
    console.print(f"statuses: {summary['statuses']}", highlight=False)
    c = summary["cache"]
    console.print(f"cache: {c['cold_compiles']} cold compiles, not empty before: "
                  f"{c['cold_cache_not_empty'] or 'none'}, "
                  f"with a hit: {c['cold_cache_hit'] or 'none'}; Inductor's own counter says miss in "
                  f"{c['inductor_cold_counter_miss']} of {c['inductor_cold']}; warm: {c['warm_hit']} "
                  f"(not a hit: {c['warm_not_hit'] or 'none'}); worker starts cold/warm: {c['worker_starts']}",
                  highlight=False)
    for policy, n in sorted(summary["gate_policies"].items()):
        console.print(f"gate: {n} x {policy}", highlight=False)
    if args.agreement and Path(args.agreement).exists():
        agreement = json.loads(Path(args.agreement).read_text())["agreement"]
        summary["do_bench"] = agreement
        worst = max((max(abs(a["diff_rel"]), abs(a["headline_diff_rel"])) for a in agreement), default=None)
        console.print(f"do_bench agreement: {len(agreement)} rows, worst |diff| "
                      f"{100 * worst:.1f}% (target 5%)" if worst is not None else "do_bench: no rows", highlight=False)
    if args.agreement_log and Path(args.agreement_log).exists():
        console.print(Path(args.agreement_log).read_text(errors="replace")[-3000:], highlight=False)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
