"""Where a run's time goes: the phase table of its cases (worker/phases.py), and its overhead share.

    python benchmarks/harness_overhead.py CONFIG [--db URL] [-- RUN ARGS...]   # run CONFIG, then the table
    python benchmarks/harness_overhead.py --run-id RUN_ID [--db URL]           # an existing run's table
    python benchmarks/harness_overhead.py --run-id A --run-id B [--db URL]     # two runs side by side

Runs go through the real CLI (`bakeoff run`), in the current folder. The overhead share is
(wall - compile - timing) / wall over the cases' worker time (cli/overhead.py). Records of runs made before
`phases_s` existed give only the compile / timing / overhead split.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bakeoff.harness.cli.overhead import elapsed_line, elapsed_s, phase_table, totals, totals_line  # noqa: E402
from bakeoff.results.store import Store  # noqa: E402


def run_config(config: str, db: str | None, extra: list[str]) -> str:
    """`bakeoff run CONFIG` through the CLI; returns the new run's id."""
    args = [sys.executable, "-m", "bakeoff", "run", config, *extra] + (["--db", db] if db else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    proc = subprocess.run(args, env=env)
    print(f"bakeoff run exited {proc.returncode} after {time.perf_counter() - t0:.1f} s", flush=True)
    if proc.returncode not in (0, 1):
        sys.exit(proc.returncode)
    return Store(db).latest_run_id()


def by_backend(records: list[dict]) -> Table:
    """Per backend label: cases, wall s per case, and its compile / timing / overhead shares."""
    t = Table("backend", "cases", "wall s/case", "compile %", "timing %", "overhead %", header_style="bold")
    labels = sorted({r["backend"] for r in records})
    for label in labels:
        tot = totals([r for r in records if r["backend"] == label])
        if tot is None:
            continue
        w = tot["wall_s"]
        t.add_row(label, str(tot["cases"]), f"{w / tot['cases']:.2f}", f"{100 * tot['compile_s'] / w:.1f}",
                  f"{100 * tot['timing_s'] / w:.1f}", f"{100 * tot['overhead_s'] / w:.1f}")
    return t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", nargs="?", help="config to run first (omit with --run-id)")
    parser.add_argument("--run-id", action="append", help="an existing run (repeat to compare runs)")
    parser.add_argument("--db", help="store URL (default: results/bakeoff.db)")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if not args.config and not args.run_id:
        parser.error("give a CONFIG to run or --run-id")
    store_db = args.db
    run_ids = list(args.run_id or [])
    if args.config:
        run_ids.append(run_config(args.config, store_db, extra))
    store = Store(store_db)
    console = Console(width=140)
    for run_id in run_ids:
        run, records = store.run(run_id), store.records(run_id)
        console.print(phase_table(records, title=f"run {run_id} ({run['config_name']}, {run['device']})"))
        console.print(by_backend(records))
        elapsed = elapsed_s(run)
        line = totals_line(records, elapsed)
        console.print(line or "no case has a wall time", highlight=False)
        over_elapsed = elapsed_line(records, elapsed)
        if over_elapsed:
            console.print(over_elapsed, highlight=False)
        tot = totals(records)
        if tot:
            console.print(f"overhead share (wall - compile - timing) / wall = "
                          f"{tot['overhead_s'] / tot['wall_s']:.3f}", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
