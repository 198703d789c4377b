"""Where a run's time goes: the phase table of its cases (worker/phases.py), and its overhead share.

    python benchmarks/harness_overhead.py CONFIG [--db URL] [-- RUN ARGS...]   # run CONFIG, then the table
    python benchmarks/harness_overhead.py --run-id RUN_ID [--db URL]           # an existing run's table
    python benchmarks/harness_overhead.py --run-id A --run-id B [--db URL]     # two runs side by side
    python benchmarks/harness_overhead.py [...] --gate-trace FILE              # and what the timing gate did

`--gate-trace FILE` reads the trace a run writes with BAKEOFF_GATE_TRACE=FILE (harness/supervise/gate.py) and splits
the run's time, moment by moment, into: timing (a worker holds the gate exclusively, by the phase it is in);
blocked (a timer waits while other workers hold it shared: the moment is split among those holders, by backend
and phase, which is what held timers off); device work (workers hold it shared, no timer waits); idle (nobody
holds it). Then the seconds workers waited for each lock, and how many cases each backend ran.

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
from collections import Counter, defaultdict
from dataclasses import dataclass, field
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


@dataclass
class Proc:
    """One worker process's state in the trace."""

    label: str = "?"  # "BACKEND PHASE" once its case arrives, "spare" while a spare gets ready
    gate: str | None = None  # "sh" or "ex" while it holds the gate
    wants: dict[str, float] = field(default_factory=dict)  # "LOCK MODE" -> since when it has waited
    phases: list[str] = field(default_factory=list)  # the phases it is in, innermost last

    def doing(self) -> str:
        return f"{self.label} / {self.phases[-1] if self.phases else '-'}"


def read_trace(path: Path) -> list[tuple[float, int, list[str]]]:
    """(epoch, pid, words) per well-formed line, in time order."""
    events = []
    for line in path.read_text(errors="replace").splitlines():
        parts = line.split()
        try:
            events.append((float(parts[0]), int(parts[1]), parts[2:]))
        except (IndexError, ValueError):
            continue
    return sorted(events, key=lambda e: e[0])


def timeline(events: list[tuple[float, int, list[str]]]) -> dict[str, object]:
    """Seconds per state of the device (above), what blocked timers and lock waits, from the events."""
    procs: dict[int, Proc] = defaultdict(Proc)
    states: Counter = Counter()
    timing_by: Counter = Counter()
    blocked_by: Counter = Counter()
    waits: Counter = Counter()
    cases: Counter = Counter()
    for (t, pid, words), nxt in zip(events, events[1:] + [None]):
        p = procs[pid]
        kind, args = words[0], words[1:]
        if kind == "case" and len(args) >= 2:
            p.label, p.phases = f"{args[1]} {args[0]}", []
            cases[args[1]] += args[0] == "cold"
        elif kind == "spare":
            p.label = "spare"
        elif kind == "phase" and args:
            p.phases.append(args[0])
        elif kind == "end" and args and args[0] in p.phases:
            p.phases.remove(args[0])
        elif kind == "want" and len(args) == 2:
            p.wants[" ".join(args)] = t
        elif kind == "got" and len(args) == 2:
            since = p.wants.pop(" ".join(args), None)
            if since is not None:
                waits[" ".join(args)] += t - since
            if args[0] == "gate":
                p.gate = args[1]
        elif kind == "drop" and args and args[0] == "gate":
            p.gate = None
        elif kind == "exit":
            procs.pop(pid, None)
        if nxt is None:
            break
        dt = nxt[0] - t
        holders = [q for q in procs.values() if q.gate == "sh"]
        timers = [q for q in procs.values() if q.gate == "ex"]
        if timers:
            states["timing"] += dt
            for q in timers:
                timing_by[q.doing()] += dt / len(timers)
        elif any("gate ex" in q.wants for q in procs.values()):
            states["blocked"] += dt
            for q in holders:
                blocked_by[q.doing()] += dt / len(holders)
            if not holders:
                blocked_by["(handing over)"] += dt
        elif holders:
            states["device work"] += dt
        else:
            states["idle"] += dt
    span = events[-1][0] - events[0][0] if events else 0.0
    return {"span_s": span, "states": states, "timing_by": timing_by, "blocked_by": blocked_by,
            "waits": waits, "cases": cases}


def _table(title: str, counts: Counter, total: float, top: int | None = None) -> Table:
    t = Table(title=title, header_style="bold")
    for col in ("what", "s", "% of run"):
        t.add_column(col, justify="left" if col == "what" else "right")
    for name, seconds in counts.most_common(top):
        t.add_row(name, f"{seconds:.1f}", f"{100 * seconds / total:.1f}" if total else "-")
    return t


def print_gate_trace(path: Path, console: Console, top: int = 12) -> int:
    events = read_trace(path)
    if not events:
        print(f"{path}: no events", file=sys.stderr)
        return 1
    out = timeline(events)
    span = out["span_s"]
    console.print(f"{path}: {len(events)} events over {span:.1f} s; cold cases by backend: "
                  + ", ".join(f"{b} {n}" for b, n in sorted(out["cases"].items())))
    console.print(_table("the device, moment by moment", out["states"], span))
    console.print(_table("timing: the exclusive holder (backend phase / step)", out["timing_by"], span, top))
    console.print(_table("blocked: shared holders while a timer waited (split among them)", out["blocked_by"], span,
                         top))
    console.print(_table("lock waits, summed over processes", out["waits"], span))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", nargs="?", help="config to run first (omit with --run-id)")
    parser.add_argument("--run-id", action="append", help="an existing run (repeat to compare runs)")
    parser.add_argument("--db", help="store URL (default: results/bakeoff.db)")
    parser.add_argument("--gate-trace", type=Path, help="the file BAKEOFF_GATE_TRACE named during a run")
    parser.add_argument("--top", type=int, default=12, help="rows of the gate trace's blocked-by table")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if not args.config and not args.run_id and not args.gate_trace:
        parser.error("give a CONFIG to run, --run-id or --gate-trace")
    store_db = args.db
    run_ids = list(args.run_id or [])
    if args.config:
        run_ids.append(run_config(args.config, store_db, extra))
    console = Console(width=140)
    store = Store(store_db) if run_ids else None
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
    if args.gate_trace:
        return print_gate_trace(args.gate_trace, console, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
