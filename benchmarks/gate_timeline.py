"""What a device's timing gate did during a run, from its trace (BAKEOFF_GATE_TRACE, harness/run/gate.py).

    BAKEOFF_GATE_TRACE=/tmp/gate.trace bakeoff run configs/h200.yaml --jobs 8
    python benchmarks/gate_timeline.py /tmp/gate.trace

Every moment of the run is one of:
- timing: a worker holds the gate exclusively (by the phase it is in: timing, profiling, ...);
- blocked: a timer waits for the gate while other workers hold it shared; the moment is split among those
  holders, by backend and phase: what held timers off;
- device work: workers hold the gate shared, no timer waits;
- idle: nobody holds the gate (every worker is in host work, or there is none).
Then the seconds workers waited for each lock, and how many cases each backend ran.
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", type=Path, help="the file BAKEOFF_GATE_TRACE named")
    ap.add_argument("--top", type=int, default=12, help="rows of the blocked-by table")
    args = ap.parse_args(argv)
    events = read_trace(args.trace)
    if not events:
        print(f"{args.trace}: no events", file=sys.stderr)
        return 1
    out = timeline(events)
    span = out["span_s"]
    console = Console(width=120)
    console.print(f"{args.trace}: {len(events)} events over {span:.1f} s; cold cases by backend: "
                  + ", ".join(f"{b} {n}" for b, n in sorted(out["cases"].items())))
    console.print(_table("the device, moment by moment", out["states"], span))
    console.print(_table("timing: the exclusive holder (backend phase / step)", out["timing_by"], span, args.top))
    console.print(_table("blocked: shared holders while a timer waited (split among them)", out["blocked_by"], span,
                         args.top))
    console.print(_table("lock waits, summed over processes", out["waits"], span))
    return 0


if __name__ == "__main__":
    sys.exit(main())
