"""Render a Comparison as plain text, Markdown (for a PR comment) or JSON."""
from __future__ import annotations

import json
import textwrap
from dataclasses import asdict
from typing import Any

from bakeoff.results.report.compare import CaseComparison, Comparison, MetricChange
from bakeoff.results.report.compare_latency import clock_text
from bakeoff.results.report.envdiff import describe

METRIC_TITLES = {"headline_ms": "latency ms", "speedup_vs_eager": "speedup vs eager", "compile_s": "compile s cold",
                 "compile_warm_s": "compile s warm", "err_rel_l2_vs_fp64": "err vs fp64",
                 "cache_hit_warm": "warm cache hit"}
COLUMNS = ("headline_ms", "speedup_vs_eager", "compile_s", "compile_warm_s", "err_rel_l2_vs_fp64")
NOISE_CHARS = 300  # of a case's noise reasons in a line; the record holds them all (headline_noise_reasons)
MARK = {"regressed": "REGRESSED", "improved": "improved", "unchanged": "", "not significant": "n.s.",
        "not comparable": "not comparable", "clock": "clock", "rose": "rose", "fell": "fell",
        "suspect": "suspect"}


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _interval(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.4g}–{ci[1]:.4g}]"


def _cycles(m: MetricChange) -> str:
    """'cycles +0.4%' (the clock is in the verdict's reason), else 'cycles +9.2% at 1980 → 1830 MHz', a side's
    NVML window clock labelled ('at 1980 (NVML) → 1830 MHz'); '' without both clocks."""
    if m.cycles_rel is None or m.base_clock_mhz is None or m.candidate_clock_mhz is None:
        return ""
    at = "" if m.verdict == "clock" else (f" at {clock_text(m.base_clock_mhz, m.base_clock_source, unit=False)} → "
                                          f"{clock_text(m.candidate_clock_mhz, m.candidate_clock_source)}")
    return f"cycles {m.cycles_rel * 100:+.1f}%{at}"


def metric_text(m: MetricChange | None) -> str:
    """'1.23 → 1.60 (+30.1%, p=0.008; cycles +21.4% at 1980 → 1830 MHz) REGRESSED'; a noisy one 'suspect (noisy:
    candidate: ...)'; the latency's note after it ('; speedup over eager held ...'); a speedup with its 95%
    intervals, '1.4 [1.3–1.5] → 1.2 [1.1–1.3] (-14.3%) fell'."""
    if m is None:
        return "-"
    if m.metric == "cache_hit_warm":
        return "hit → miss REGRESSED"
    rel = "" if m.rel is None else f"{m.rel * 100:+.1f}%"
    p = f"p={m.p_value:.2g}" if m.p_value is not None else ""
    inner = "; ".join(x for x in (", ".join(x for x in (rel, p) if x), _cycles(m)) if x)
    why = textwrap.shorten(m.why, NOISE_CHARS, placeholder=" …") if m.why and m.verdict == "suspect" else m.why
    mark = "; ".join(x for x in (MARK.get(m.verdict, m.verdict) + (f" ({why})" if why else ""), m.note or "") if x)
    return (f"{_fmt(m.base)}{_interval(m.base_interval)} → {_fmt(m.candidate)}{_interval(m.candidate_interval)}"
            + (f" ({inner})" if inner else "") + (f" {mark}" if mark else ""))


def _by_metric(c: CaseComparison) -> dict[str, MetricChange]:
    return {m.metric: m for m in c.changes}


def _status_text(c: CaseComparison) -> str:
    if c.status_verdict == "same":
        return c.candidate_status
    text = f"{c.base_status} → {c.candidate_status}"
    if c.status_verdict == "missing":
        return text + " (allowed)"
    if c.status_verdict == "not comparable":
        return text + " (not comparable)"
    return text + (" REGRESSED" if c.status_verdict == "regressed" else f" ({c.status_verdict})")


def headline(cmp: Comparison) -> str:
    if cmp.with_itself:
        return (f"Run {cmp.base_run['run_id']} compared with itself: every difference is zero by construction "
                f"(0 regression(s) in {len(cmp.matched)} case(s)), so this says nothing about a change; pass two "
                "different runs, e.g. `bakeoff compare previous latest`")
    n = len(cmp.regressions)
    suspect = sum(c.suspect for c in cmp.regressions)
    suspect_text = f" ({suspect} suspect: a noisy headline, still counted)" if suspect else ""
    improved = sum(c.improved for c in cmp.cases)
    missing = f", {len(cmp.only_base)} missing from the candidate" if cmp.only_base else ""
    apart = f", {len(cmp.not_comparable)} not comparable" if cmp.not_comparable else ""
    noisy = sum(bool(c.noisy) for c in cmp.matched)
    noisy_text = f", {noisy} measured noisy" if noisy else ""
    clock = sum(c.clock_explained for c in cmp.matched)
    clock_note = f", {clock} latency change(s) explained by the SM clock" if clock else ""
    return (f"{n} regression(s){suspect_text}, {improved} improvement(s) in {len(cmp.matched)} matched case(s)"
            f"{missing}{apart}{clock_note}{noisy_text}: {cmp.base_run['run_id']} (base) → {cmp.candidate_run['run_id']} (candidate)")


def _why_not(c: CaseComparison) -> str:
    """Why a case, or which of its metrics, could not be compared."""
    if c.not_comparable:
        return "; ".join(c.not_comparable)
    return "; ".join(f"{METRIC_TITLES.get(m.metric, m.metric)}: {m.why}" for m in c.changes
                     if m.verdict == "not comparable")


def _noise_text(c: CaseComparison) -> str:
    """' (rests on a noisy measurement: candidate: ...)' for a regression, ' (noisy: ...)' otherwise."""
    if not c.noisy:
        return ""
    lead = "rests on a noisy measurement" if c.regressed else "noisy"
    notes = c.noisy
    # each note starts with its side ('candidate: ...', 'base speedup: ...')
    sides = [next((s for s in ("candidate", "base") if n.startswith(s)), "") for n in notes]
    rest = [n[len(s):] for n, s in zip(notes, sides)]
    if len(notes) == 2 and set(sides) == {"candidate", "base"} and rest[0] == rest[1]:
        notes = [f"base and candidate{rest[0]}"]  # the same on both sides (a run with itself)
    return f" ({lead}: {textwrap.shorten('; '.join(notes), NOISE_CHARS, placeholder=' …')})"  # cut between words


def _notes(cmp: Comparison) -> list[str]:
    out = [f"Environment: {describe(cmp.env_changes)}."]
    if not cmp.same_fingerprint:
        out.append(f"Fingerprints differ ({cmp.base_run.get('fingerprint')} vs {cmp.candidate_run.get('fingerprint')}):"
                   " numbers were measured under different conditions.")
    if cmp.only_base:
        out.append(f"Missing from the candidate ({'allowed: --allow-missing' if cmp.allow_missing else 'each a regression'}"
                   f"): " + ", ".join("/".join(k) for k in cmp.only_base) + ".")
    if cmp.only_candidate:
        out.append("Only in candidate: " + ", ".join("/".join(k) for k in cmp.only_candidate) + ".")
    if cmp.not_comparable:
        out.append(f"Not comparable, never counted as regressions ({len(cmp.not_comparable)}): "
                   + "; ".join(f"{'/'.join(c.key)} ({_why_not(c)})" for c in cmp.not_comparable) + ".")
    out.append(_rule(cmp))
    return out


def _rule(cmp: Comparison) -> str:
    """What counts, what never does, and what marks a side noisy, with the comparison's thresholds."""
    t = cmp.thresholds
    return (f"Rule: latency regresses when the median grows ≥ {t.latency:.0%} and Mann-Whitney U p < {t.alpha:g} "
            f"on the raw samples, unless time × SM clock moved by less than {t.latency:.0%} (then: clock, never "
            "counted; a side's clock is the headline's, else NVML's median over the timing window, marked (NVML)); "
            "a latency regression where a side's headline is noisy is suspect, still counted; compile "
            f"≥ {t.compile_cold:.0%} cold, ≥ {t.compile_warm:.0%} warm and by ≥ {t.compile_abs_s:g} s; error vs "
            f"fp64 > {t.error_factor:g}× (errors below {t.error_floor:g} unit roundoff of the dtype count as equal); "
            "any ok → failure status" + ("" if cmp.allow_missing else "; any case missing from the candidate")
            + ". Never counted: a case whose bound graph or backend options differ (graph_digest, options_digest), "
            "a latency whose timing settings or method differ (timing_digest, timing_method), an error whose "
            f"input seeds differ, the speedup over eager (shown: it rose or fell by ≥ {t.latency:.0%}, not "
            "significant where both 95% intervals overlap; a faster eager lowers every speedup). A latency that "
            "moved while the speedup held says so: eager, timed beside it at the same clock, moved alike. Noisy: a "
            "side's latency by the headline's own samples (headline_noise_reasons; older records: the case's "
            "noise_reasons), never by what cannot move its method (host load beside a device-timed headline, the "
            "run's own gated workers), its speedup by the paired ratios (speedup_noise_reasons).")


def to_text(cmp: Comparison) -> str:
    lines = [headline(cmp), *_notes(cmp), ""]
    for c in sorted(cmp.cases, key=lambda c: not c.regressed):
        ms = _by_metric(c)
        flag = ("SUSPECT    " if c.suspect else "REGRESSION ") if c.regressed else (
            "improved   " if c.improved else "           ")
        lines.append(f"{flag}{'/'.join(c.key)}: status {_status_text(c)}"
                     + (f" ({c.candidate_reason[:120]})" if c.status_verdict == "regressed" and c.candidate_reason
                        else "") + (f" ({_why_not(c)})" if c.not_comparable else "") + _noise_text(c))
        for metric in (*COLUMNS, "cache_hit_warm"):
            if metric in ms:
                lines.append(f"    {METRIC_TITLES[metric]:<16} {metric_text(ms[metric])}")
    return "\n".join(lines)


def _md_row(c: CaseComparison) -> str:
    ms = _by_metric(c)
    cells = ["/".join(c.key), _status_text(c) + (f" ({_why_not(c)})" if c.not_comparable else "")
             + _noise_text(c)] + [metric_text(ms.get(m)) for m in COLUMNS]
    if "cache_hit_warm" in ms:
        cells[2 + COLUMNS.index("compile_warm_s")] += " (cache hit → miss)"
    return "| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |"


def to_markdown(cmp: Comparison) -> str:
    head = ("| case | status | " + " | ".join(METRIC_TITLES[m] for m in COLUMNS) + " |\n"
            + "|---" * (2 + len(COLUMNS)) + "|")
    regs = [c for c in cmp.cases if c.regressed]
    icon = ":x:" if regs else ":white_check_mark:"
    out = [f"### bakeoff compare {icon}", "", f"**{headline(cmp)}**", ""]
    out += [f"- {n}" for n in _notes(cmp)] + [""]
    if regs:
        out += ["#### Regressions", "", head, *[_md_row(c) for c in regs], ""]
    improved = [c for c in cmp.cases if c.improved]
    if improved:
        out += ["#### Improvements", "", head, *[_md_row(c) for c in improved], ""]
    clock = [c for c in cmp.cases if c.clock_explained]
    if clock:
        out += ["#### Latency changes explained by the SM clock (never counted)", "", head,
                *[_md_row(c) for c in clock], ""]
    if cmp.not_comparable:
        out += ["#### Not comparable (never counted)", "", head, *[_md_row(c) for c in cmp.not_comparable], ""]
    out += ["<details><summary>All cases</summary>", "", head, *[_md_row(c) for c in cmp.cases], "",
            "</details>", ""]
    return "\n".join(out)


def to_json(cmp: Comparison) -> str:
    def case(c: CaseComparison) -> dict[str, Any]:
        return {**asdict(c), "key": dict(zip(("workload", "shape", "dtype", "backend"), c.key, strict=True)),
                "regressed": c.regressed, "improved": c.improved, "incomparable": c.incomparable,
                "clock_explained": c.clock_explained}

    doc = {"base": cmp.base_run["run_id"], "candidate": cmp.candidate_run["run_id"],
           "thresholds": asdict(cmp.thresholds), "regressions": len(cmp.regressions),
           "with_itself": cmp.with_itself, "not_comparable": len(cmp.not_comparable),
           "same_fingerprint": cmp.same_fingerprint,
           "environment_changes": [asdict(e) for e in cmp.env_changes],
           "only_base": ["/".join(k) for k in cmp.only_base],
           "only_candidate": ["/".join(k) for k in cmp.only_candidate],
           "cases": [case(c) for c in cmp.cases]}
    return json.dumps(doc, indent=1, default=str)


FORMATS = {"text": to_text, "markdown": to_markdown, "json": to_json}
