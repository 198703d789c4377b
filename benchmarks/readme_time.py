"""How long README.md's first command's `bakeoff run` takes (target: 3 minutes or less on a 2-core CPU machine).

    python benchmarks/readme_time.py [--keep DIR] [-- RUN ARGS...]

Runs `python -m bakeoff run` exactly as the README does (no config: the built-in default benchmark on
whatever device is present) in a scratch folder, so its store is that folder's default `results/bakeoff.db`,
and prints: the command's wall time against the target, the cases by status, seconds per backend (the cases'
worker time), the slowest cases, the run's totals line and the top lines of its phase table. The install is
not timed. Run it on a quiet machine; the machine's state that changes the figures is printed first
(cores, load, Inductor's precompiled headers already on this machine: backends/inductor_cpu.py).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bakeoff.harness.cli.overhead import elapsed_s, phase_table, totals_line  # noqa: E402
from bakeoff.results.store import Store  # noqa: E402

TARGET_S = 180.0


def machine_state() -> str:
    headers = Path(tempfile.gettempdir()) / f"torchinductor_{os.environ.get('USER', 'root')}" / "precompiled_headers"
    found = len(list(headers.glob("*.gch"))) if headers.is_dir() else 0
    load = os.getloadavg()
    return (f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; Inductor precompiled "
            f"headers on this machine: {found} ({headers})")


def backend_table(records: list[dict]) -> Table:
    t = Table("backend", "cases", "worker s", "s per case", "compile s", "setup s (cold+warm)", header_style="bold")
    for label in sorted({r["backend"] for r in records}):
        rows = [r for r in records if r["backend"] == label and r.get("wall_s")]
        wall = sum(r["wall_s"] for r in rows)
        comp = sum((r.get("compile_s") or 0) + (r.get("compile_warm_s") or 0) for r in rows)
        setup = sum((r.get("compile_process_setup_s") or 0) + (r.get("compile_process_setup_warm_s") or 0)
                    for r in rows)
        t.add_row(label, str(len(rows)), f"{wall:.1f}", f"{wall / max(len(rows), 1):.1f}", f"{comp:.1f}", f"{setup:.1f}")
    return t


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", help="run in this folder and keep it (default: a scratch folder, deleted)")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    console = Console(width=150)
    console.print(machine_state(), highlight=False)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="readme-time-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "bakeoff", "run", *extra]
    try:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode not in (0, 1):
            console.print(proc.stdout[-3000:], proc.stderr[-3000:], markup=False)
            return proc.returncode
        store = Store(f"sqlite:///{work / 'results' / 'bakeoff.db'}")
        run_id = store.latest_run_id()
        run, records = store.run(run_id), store.records(run_id)
        flat = [r.flat() for r in store.case_records(run_id)]
        statuses = {s: sum(r["status"] == s for r in records) for s in sorted({r["status"] for r in records})}
        verdict = "met" if wall <= TARGET_S else "missed"
        console.print(f"`bakeoff run` (README's first command, install not counted): {wall:.1f} s wall, target "
                      f"{TARGET_S:.0f} s: {verdict}; {len(records)} cases "
                      f"({', '.join(f'{n} {s}' for s, n in statuses.items())}); run {run_id} on {run['device']}",
                      highlight=False)
        console.print(backend_table(flat))
        slow = sorted((r for r in flat if r.get("wall_s")), key=lambda r: -r["wall_s"])[:5]
        console.print("slowest cases: " + "; ".join(f"{r['workload']} {r['backend']} {r['wall_s']:.1f} s"
                                                   for r in slow), highlight=False)
        console.print(totals_line(records, elapsed_s(run)) or "", highlight=False)
        console.print(phase_table(records, title=f"run {run_id}: phases"))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
