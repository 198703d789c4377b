"""How much of each case's kernel time the report ties to the code that produced it: per case with a CUPTI
kernel list (`kernel_times`, a GPU run), the share of the call's kernel time tied by name, by IREE dispatch
index, by library (a cuBLAS/cuDNN kernel to the call that launches it) or by ONNX op type, the share left
untied, and the untied names. Reads the store and each case's artifacts folder, as `bakeoff report` does.

    python benchmarks/kernel_attribution.py [RUN_ID] [--db URL]

Run it where the run's artifacts are (on the GPU machine, after `bakeoff run configs/h200.yaml ...`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402
from rich.text import Text  # noqa: E402

from bakeoff.results.report.artifacts import case_artifacts  # noqa: E402
from bakeoff.results.report.data import load_run  # noqa: E402
from bakeoff.results.report.kernels import kernel_table, library  # noqa: E402
from bakeoff.results.store import Store  # noqa: E402

HOW = ("name", "dispatch", "library", "op type", "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_id", nargs="?", help="run (default: the latest)")
    ap.add_argument("--db", default=None, help="results store URL (default sqlite:///results/bakeoff.db)")
    args = ap.parse_args()
    store = Store(args.db)
    run = load_run(store, args.run_id or store.latest_run_id())
    t = Table(title=f"kernel attribution, run {run.run_id}: share of each call's kernel time, by how it was tied")
    for col in ("case", "artifacts", "kernels", "by name", "by dispatch", "by library", "by op type",
                "untied, library known", "untied", "untied names"):
        t.add_column(col, justify="left" if col in ("case", "artifacts", "untied names") else "right",
                     no_wrap=col != "untied names")
    total = {h: 0.0 for h in HOW}
    for case in run.cases:
        if not case.get("kernel_times"):
            continue
        artifacts, note = case_artifacts(case)
        rows = [r for r in kernel_table(case, {a.name: a.text for a in artifacts if a.text is not None})
                if r.launches is not None]
        share = {h: sum(r.share or 0.0 for r in rows if r.matched == h) for h in HOW}
        for h in HOW:
            total[h] += share[h]
        known = sum(r.share or 0.0 for r in rows if not r.matched and library(r.name))
        untied = ", ".join(r.name[:40] for r in rows if not r.matched and not library(r.name))[:120]
        t.add_row(Text(str(case.get("case_id"))), "found" if artifacts else ("missing" if "not found" in note else "none"), str(len(rows)),
                  *(f"{100 * share[h]:.1f}%" for h in HOW[:-1]), f"{100 * known:.1f}%",
                  f"{100 * (share[''] - known):.1f}%", Text(untied))
    cases = sum(1 for c in run.cases if c.get("kernel_times"))
    if cases:
        t.add_section()
        t.add_row("mean over cases", "", "", *(f"{100 * total[h] / cases:.1f}%" for h in HOW[:-1]), "",
                  f"{100 * total[''] / cases:.1f}% (both)", "")
    Console(width=max(Console().width, 200)).print(t if cases else Text(f"run {run.run_id}: no case has a CUPTI kernel list (a CPU run?)"))


if __name__ == "__main__":
    main()
