"""The tables and verdicts of benchmarks/inject_disturbance.py: what its three runs (quiet, an outsider on the
GPU, CPU burners) show, read from their stores: per phase and backend the ok cases, the marks (headline,
speedup, host figures), the cases whose timing met the disturbance, what NVML saw, the reasons by kind, and a
verdict per requirement (inject_disturbance.py's docstring states them).
"""
from __future__ import annotations

import collections
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bakeoff.harness.measure.noise import DEVICE_METHODS  # noqa: E402
from bakeoff.results.store import Store  # noqa: E402

QUIET_NOISY_LIMIT = 0.05

@dataclass
class Phase:
    """One run: its store, run id and the window (epoch seconds) its disturbance was active in."""

    name: str
    store: str
    run_id: str | None = None
    window: tuple[float, float] | None = None
    exit_code: int | None = None
    elapsed_s: float | None = None
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)


def save_phases(phases: list[Phase], out: Path) -> None:
    (out / "phases.json").write_text(json.dumps(
        [{k: v for k, v in asdict(p).items() if k != "records"} for p in phases], indent=1))


def load_phases(out: Path) -> list[Phase]:
    """The phases of a finished DIR (phases.json), their stores read: PHASE.db in DIR (a DIR copied from the
    machine that ran it), else the store phases.json names."""
    phases = []
    for row in json.loads((out / "phases.json").read_text()):
        here = out / f"{row['name']}.db"
        store = f"sqlite:///{here.resolve()}" if here.exists() else row["store"]
        phase = Phase(**{**row, "store": store, "window": tuple(row["window"]) if row.get("window") else None})
        phase.records = read_records(phase.store, phase.run_id)
        phases.append(phase)
    return phases


def read_records(url: str, run_id: str | None) -> list[dict[str, Any]]:
    """The flat records (details merged in) of `run_id` in the store, every status."""
    if run_id is None:
        return []
    return [{**{k: v for k, v in r.items() if k != "details"}, **(r.get("details") or {})}
            for r in Store(url).records(run_id)]


# --- the tables and verdicts --------------------------------------------------------------------------------

def overlaps(rec: dict[str, Any], window: tuple[float, float] | None) -> bool:
    """The case's timing windows meet `window`; a record without timing windows is taken to (the disturbance
    ran across the whole run); no window (the quiet phase) meets nothing."""
    if window is None:
        return False
    spans = rec.get("timing_windows_epoch_s")
    if not spans:
        return True
    return any(start < window[1] and end > window[0] for start, end in spans)


def device_timed(rec: dict[str, Any]) -> bool:
    return rec.get("headline_method") in DEVICE_METHODS


def reason_kind(reason: str) -> str:
    """A reason without its numbers and pids, so that the same rule's reasons count together."""
    return re.sub(r"\(pid [^)]*\)", "", re.sub(r"\d[\d.,]*(e-?\d+)?", "N", reason)).split(": medians")[0].strip()


def rows_of(phase: Phase) -> list[dict[str, Any]]:
    """Per backend: ok cases and how many of them each figure's mark calls noisy, how many overlapped the
    disturbance, in how many NVML saw a process on the GPU that is no gated worker of the run, and in how many it
    could not tell (gpu_process_error)."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for rec in phase.records:
        c = counts[str(rec.get("backend"))]
        if rec.get("status") != "ok":
            c["not_ok"] += 1
            continue
        c["ok"] += 1
        c["headline_noisy"] += rec.get("headline_quality") == "noisy"
        c["speedup_judged"] += rec.get("speedup_quality") is not None
        c["speedup_noisy"] += rec.get("speedup_quality") == "noisy"
        c["host_noisy"] += rec.get("host_quality") == "noisy"
        c["device_timed"] += device_timed(rec)
        c["overlap"] += overlaps(rec, phase.window)
        c["nvml_error"] += bool(rec.get("gpu_process_error"))
        c["nvml_outsider"] += any(not p.get("gated_sibling") for p in rec.get("gpu_other_processes") or [])
    keys = ("ok", "not_ok", "headline_noisy", "speedup_judged", "speedup_noisy", "host_noisy", "device_timed",
            "overlap", "nvml_outsider", "nvml_error")
    return [{"backend": b, **{k: c[k] for k in keys}} for b, c in sorted(counts.items())]


def reasons_of(phase: Phase) -> dict[str, dict[str, int]]:
    """Per figure (headline, speedup, host), each kind of reason that fired and in how many ok cases."""
    out: dict[str, collections.Counter] = {f: collections.Counter() for f in ("headline", "speedup", "host")}
    for rec in phase.records:
        if rec.get("status") == "ok":
            for figure, counter in out.items():
                counter.update({reason_kind(r) for r in rec.get(f"{figure}_noise_reasons") or []})
    return {f: dict(c.most_common()) for f, c in out.items()}


def _case(rec: dict[str, Any]) -> str:
    return f"{rec.get('backend')} {rec.get('workload')} {rec.get('dtype')}"


def _nvml_note(rec: dict[str, Any]) -> str:
    """What NVML saw on the GPU during the case's timing: the outsider's pids, or why it could not tell."""
    others = [p for p in rec.get("gpu_other_processes") or [] if not p.get("gated_sibling")]
    if others:
        return "NVML saw pid " + ", ".join(str(p.get("pid")) for p in others)
    return f"NVML saw no outsider ({rec['gpu_process_error']})" if rec.get("gpu_process_error") else \
        "NVML saw no outsider"


def _quiet_verdict(ok: list[dict[str, Any]]) -> tuple[bool | None, str, list[str]]:
    noisy = [r for r in ok if "noisy" in (r.get("headline_quality"), r.get("speedup_quality"))]
    share = len(noisy) / len(ok) if ok else None
    text = (f"quiet: {len(noisy)} of {len(ok)} ok cases have a noisy headline or speedup "
            f"({share or 0:.0%}, limit {QUIET_NOISY_LIMIT:.0%})")
    why = [f"{_case(r)}: " + "; ".join((r.get("headline_noise_reasons") or []) + (r.get("speedup_noise_reasons") or []))
           for r in noisy]
    return (share <= QUIET_NOISY_LIMIT if share is not None else None), text, why


def _outsider_verdict(hit: list[dict[str, Any]]) -> tuple[bool | None, str, list[str]]:
    failing = [f"{_case(r)}: headline {r.get('headline_quality')}, speedup {r.get('speedup_quality')}; {_nvml_note(r)}"
               for r in hit if r.get("headline_quality") != "noisy" or r.get("speedup_quality") == "clean"]
    text = (f"outsider: {len(hit) - len(failing)} of the {len(hit)} ok cases whose timing overlapped the "
            f"outsider are noisy in headline and speedup (eager's own case: headline)")
    return (not failing) if hit else None, text, failing


def _burners_verdict(hit: list[dict[str, Any]]) -> tuple[bool | None, str, list[str]]:
    host_noisy = [r for r in hit if r.get("host_quality") == "noisy"]
    dev = [r for r in hit if device_timed(r)]
    by_host = [r for r in hit if not device_timed(r)]
    # 'clock': the headline spread with the SM clock and is steady in cycles, not noise
    dev_clean = [r for r in dev if r.get("headline_quality") in ("clean", "clock")]
    host_head_noisy = [r for r in by_host if r.get("headline_quality") == "noisy"]
    failing = [f"{_case(r)}: host figures {r.get('host_quality')}" for r in hit if r not in host_noisy]
    failing += [f"{_case(r)}: device-timed headline {r.get('headline_quality')}" for r in dev if r not in dev_clean]
    failing += [f"{_case(r)}: host-timed headline {r.get('headline_quality')}"
                for r in by_host if r not in host_head_noisy]
    text = (f"burners: of the {len(hit)} ok cases beside them, host-clock figures noisy in {len(host_noisy)}; "
            f"device-timed headlines clean (or at clock) in {len(dev_clean)} of {len(dev)}; host-timed headlines noisy in "
            f"{len(host_head_noisy)} of {len(by_host)}")
    return (not failing) if hit else None, text, failing


def verdict(phase: Phase) -> dict[str, Any]:
    """The phase's requirement: {"phase", "ok" (True, False, or None: nothing to judge), "text", "failing"}."""
    ok = [r for r in phase.records if r.get("status") == "ok"]
    hit = [r for r in ok if overlaps(r, phase.window)]
    judge = {"quiet": lambda: _quiet_verdict(ok), "outsider": lambda: _outsider_verdict(hit),
             "burners": lambda: _burners_verdict(hit)}[phase.name]
    holds, text, failing = judge()
    return {"phase": phase.name, "ok": holds, "text": text, "failing": failing}


def report(phases: list[Phase], dry_run: bool) -> dict[str, Any]:
    """The tables and verdicts as one JSON-ready dict."""
    return {"dry_run": dry_run,
            "phases": {p.name: {"store": p.store, "run_id": p.run_id, "window": p.window, "exit_code": p.exit_code,
                                "elapsed_s": p.elapsed_s, "rows": rows_of(p), "reasons": reasons_of(p)}
                       for p in phases},
            "verdicts": [verdict(p) for p in phases]}


def render(rep: dict[str, Any]) -> str:
    """The report as text: a table per phase, its reasons by kind, then the verdict lines."""
    lines = []
    cols = ("ok", "headline ~", "speedup ~", "host ~", "overlap", "dev-timed", "NVML saw", "NVML err", "not ok")
    for name, ph in rep["phases"].items():
        lines += [f"== {name}: run {ph['run_id']} ({ph['store']})", f"  {'backend':12s}"
                  + "".join(f"{c:>11s}" for c in cols)]
        for r in ph["rows"]:
            cells = (r["ok"], r["headline_noisy"], f"{r['speedup_noisy']}/{r['speedup_judged']}", r["host_noisy"],
                     r["overlap"], r["device_timed"], r["nvml_outsider"], r["nvml_error"], r["not_ok"])
            lines.append(f"  {r['backend']:12s}" + "".join(f"{c!s:>11s}" for c in cells))
        for figure, kinds in ph["reasons"].items():
            lines += [f"    {figure} reason: {n} x {kind}" for kind, n in kinds.items()]
    if rep["dry_run"]:
        lines.append("CPU dry run: the outsider is a CPU matmul (host load, not a GPU process) and no headline is "
                     "device-timed, so this cannot show the GPU rule; it shows the plumbing")
    for v in rep["verdicts"]:
        mark = {True: "PASS", False: "FAIL", None: "n/a "}[v["ok"]]
        lines.append(f"verdict {mark} {v['text']}")
        lines += [f"    {f[:300]}" for f in v["failing"][:20]]
    return "\n".join(lines)
