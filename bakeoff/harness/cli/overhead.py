"""Where a run's time went: its totals line (end of `bakeoff show`) and the phase table
(benchmarks/harness_overhead.py), from the records' `wall_s` and `phases_s` (worker/phases.py).

Measuring is compiling (cold and warm) and timing (the timed samples, host latency, graph replay and the
profiled pass); everything else (process start, imports, inputs, baseline, reference, checks, gate wait,
...) is the harness's overhead. Records without `phases_s` (older runs) fall back on `compile_total_s`,
`compile_warm_total_s` and the timing windows.

Two shares, which agree for one worker: over the cases' worker time (summed, so with N workers on one device
a worker waiting for another's timing counts that wait as overhead: `gate_wait`), and over the run's elapsed
time (`elapsed_split`: the share of the elapsed seconds during which no case was compiling or timing, from the
records' `compile_windows_epoch_s` and `timing_windows_epoch_s`: what the run spent doing neither, whatever the
parallelism).
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Iterable

from rich.table import Table

from bakeoff.harness.worker.phases import COMPILE_PHASES, ORCHESTRATOR_PHASES, PROCESS_PHASES, TIMING_PHASES


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    """A record as stored (fields that are not columns under `details`) or as exported (flat), flat."""
    return {**(record.get("details") or {}), **record}


def elapsed_s(run: dict[str, Any], resumed_at: dt.datetime | None = None) -> float | None:
    """Seconds from a run's start to its end; None while it runs. Of a resumed run, the seconds from
    `resumed_at` (when its last resume started) to its end; None without it, or when the run ended before it
    (the span from the run's start would include the time between sessions)."""
    start, end = resumed_at if run.get("resumes") else run.get("started_at"), run.get("ended_at")
    if start is None or end is None:
        return None
    span = (_aware(end) - _aware(start)).total_seconds()
    return span if span >= 0 else None


def _aware(t: dt.datetime) -> dt.datetime:
    """A stored time in UTC with its zone (SQLite gives it back without one)."""
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


def case_split(record: dict[str, Any]) -> tuple[float, float, float] | None:
    """(wall, compile, timing) seconds of one record; None when it has no wall time (a skipped case)."""
    record = _flat(record)
    wall = record.get("wall_s")
    if not wall:
        return None
    phases = record.get("phases_s")
    if phases:
        compile_s = sum(phases.get(p, 0.0) for p in COMPILE_PHASES)
        timing_s = sum(phases.get(p, 0.0) for p in TIMING_PHASES)
        return wall, compile_s, timing_s
    compile_s = sum(record.get(k) or 0.0 for k in ("compile_process_setup_s", "compile_process_setup_warm_s")) + (
        record.get("compile_total_s") or record.get("compile_s") or 0.0) + (
        record.get("compile_warm_total_s") or record.get("compile_warm_s") or 0.0)
    timing_s = sum(end - start for start, end in record.get("timing_windows_epoch_s") or [])
    return wall, compile_s, timing_s


def totals(records: Iterable[dict[str, Any]]) -> dict[str, float] | None:
    """Seconds summed over the run's cases: wall, compile, timing, overhead (wall - compile - timing)."""
    splits = [s for s in (case_split(r) for r in records) if s is not None]
    if not splits:
        return None
    wall, compile_s, timing_s = (sum(s[i] for s in splits) for i in range(3))
    return {"cases": len(splits), "wall_s": wall, "compile_s": compile_s, "timing_s": timing_s,
            "overhead_s": wall - compile_s - timing_s}


def _union_s(windows: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start, end) windows."""
    covered, end = 0.0, float("-inf")
    for a, b in sorted(windows):
        if b <= end:
            continue
        covered += b - max(a, end)
        end = b
    return covered


def elapsed_split(records: Iterable[dict[str, Any]], elapsed_s: float | None) -> dict[str, float] | None:
    """Over `elapsed_s` seconds of a run (its sessions' time, without the pauses between them): the seconds during
    which some case was compiling or timing (`measuring_s`, the union of the records' compile and timing
    windows), of which timing (`timing_s`), and `overhead_share` = 1 - measuring / elapsed. None when no record
    has `compile_windows_epoch_s` (runs recorded before them) or `elapsed_s` is unknown."""
    rows = [_flat(r) for r in records]
    if not elapsed_s or not any(r.get("compile_windows_epoch_s") for r in rows):
        return None
    timing = [tuple(w) for r in rows for w in r.get("timing_windows_epoch_s") or []]
    both = timing + [tuple(w) for r in rows for w in r.get("compile_windows_epoch_s") or []]
    measuring = min(_union_s(both), elapsed_s)
    return {"elapsed_s": elapsed_s, "measuring_s": measuring, "timing_s": min(_union_s(timing), elapsed_s),
            "overhead_share": 1.0 - measuring / elapsed_s}


def elapsed_line(records: list[dict[str, Any]], elapsed_s: float | None) -> str | None:
    """'of the E s elapsed, a case was compiling or timing during m% (timing t%): overhead o%'; None when unknown."""
    split = elapsed_split(records, elapsed_s)
    if split is None:
        return None
    e = split["elapsed_s"]
    return (f"of the {e:.1f} s elapsed, some case was compiling or timing during {100 * split['measuring_s'] / e:.0f}%"
            f" (timing {100 * split['timing_s'] / e:.0f}%): overhead {100 * split['overhead_share']:.0f}%")


def totals_line(records: list[dict[str, Any]], elapsed_s: float | None = None) -> str | None:
    """'N cases, wall W s (elapsed E s): compiling a%, timing b%, overhead c% (largest: ...)'; None when no
    case has a wall time."""
    t = totals(records)
    if t is None:
        return None
    wall = t["wall_s"]
    head = f"{t['cases']} cases ran for {wall:.1f} s of worker time" + (
        f" ({elapsed_s:.1f} s elapsed)" if elapsed_s else "")
    line = (f"{head}: compiling {100 * t['compile_s'] / wall:.0f}%, timing {100 * t['timing_s'] / wall:.0f}%, "
            f"overhead {100 * t['overhead_s'] / wall:.0f}%")
    largest = sorted(overhead_phases(records).items(), key=lambda kv: -kv[1])[:3]
    if largest:
        line += " (largest: " + ", ".join(f"{name} {100 * s / wall:.0f}%" for name, s in largest) + ")"
    return line


def overhead_phases(records: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Seconds per overhead phase, summed over the records (cold and warm processes together)."""
    measuring = set(COMPILE_PHASES) | set(TIMING_PHASES) | {f"warm_{p}" for p in TIMING_PHASES}
    out: dict[str, float] = {}
    for r in map(_flat, records):
        for name, seconds in (r.get("phases_s") or {}).items():
            if name not in measuring:
                base = name.removeprefix("warm_")
                out[base] = out.get(base, 0.0) + seconds
    return out


def phase_table(records: list[dict[str, Any]], title: str = "") -> Table:
    """One row per phase: seconds summed over the cases (cold process, warm process), per case, share of
    the cases' wall time; then compile, timing and overhead."""
    rows = [r for r in map(_flat, records) if r.get("wall_s")]
    wall = sum(r["wall_s"] for r in rows) or 1.0
    names = list(dict.fromkeys(["setup", *PROCESS_PHASES, *ORCHESTRATOR_PHASES]))
    seen = {n.removeprefix("warm_") for r in rows for n in (r.get("phases_s") or {})}
    names += sorted(seen - set(names))
    t = Table(title=title, header_style="bold")
    for col in ("phase", "kind", "cold s", "warm s", "s per case", "% of wall"):
        t.add_column(col, justify="left" if col in ("phase", "kind") else "right")
    for name in names:
        cold = sum((r.get("phases_s") or {}).get(name, 0.0) for r in rows)
        warm = sum((r.get("phases_s") or {}).get(f"warm_{name}", 0.0) for r in rows)
        if name not in seen or cold + warm == 0:
            continue
        kind = "compile" if name in COMPILE_PHASES else "timing" if name in TIMING_PHASES else "overhead"
        t.add_row(name, kind, f"{cold:.2f}", f"{warm:.2f}" if warm else "-", f"{(cold + warm) / len(rows):.3f}",
                  f"{100 * (cold + warm) / wall:.1f}")
    tot = totals(rows)
    if tot:
        t.add_section()
        for key in ("compile_s", "timing_s", "overhead_s", "wall_s"):
            t.add_row(key.removesuffix("_s"), "", "", "", f"{tot[key] / tot['cases']:.3f}",
                      f"{100 * tot[key] / tot['wall_s']:.1f}")
    return t
