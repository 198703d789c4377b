"""Per-point table of shape sweeps from `bakeoff export` JSON (stdin or a file): one block per sweep case, one row
per value served, with the backend's compile count at that point (and tritongen's generated sources and Triton's
own compiled kernels), the time to the first result and the latency.

    bakeoff export latest --db sqlite:///sweep.db | python benchmarks/sweep_points.py
"""
from __future__ import annotations

import argparse
import json
import sys


def _fmt(v, spec: str = "") -> str:
    if v is None:
        return "-"
    return format(v, spec) if spec else str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", help="export JSON (default: stdin)")
    args = ap.parse_args()
    records = json.load(open(args.file) if args.file else sys.stdin)
    for r in sorted((r for r in records if r.get("sweep")), key=lambda r: r["case_id"]):
        print(f"\n{r['case_id']}  [{r['status']}]  compiles {_fmt(r.get('sweep_compiles'))}  "
              f"serve {_fmt(r.get('sweep_serve_s'), '.2f')} s  setup {_fmt(r.get('sweep_setup_s'), '.2f')} s")
        print(f"  served: {r.get('sweep_serving')}")
        print(f"  counter: {r.get('sweep_compile_counter')}")
        print(f"  {'value':>7} {'first_s':>9} {'recomp':>6} {'compiles':>8} {'sources':>7} {'triton':>6} "
              f"{'ms':>9} {'err_l2':>9}  status")
        for p in r["sweep"]:
            print(f"  {p['value']:>7} {_fmt(p.get('first_result_s'), '.4f'):>9} {_fmt(p.get('recompiled')):>6} "
                  f"{_fmt(p.get('compiles_so_far')):>8} {_fmt(p.get('kernel_sources_so_far')):>7} "
                  f"{_fmt(p.get('triton_compiles_so_far')):>6} {_fmt(p.get('headline_ms'), '.4f'):>9} "
                  f"{_fmt(p.get('err_rel_l2_vs_fp64'), '.2e'):>9}  {p.get('status')}"
                  + (f" ({p['reason'][:80]})" if p.get("reason") else ""))


if __name__ == "__main__":
    main()
