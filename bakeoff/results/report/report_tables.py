"""The tables of the HTML report: every case, each run's environment (the decision's: decision_tables)."""
from __future__ import annotations

import json
from typing import Any, Callable

from bakeoff.results.report.data import (RunData, fnum, hardware_name, headline_method, headline_ms, headline_spread,
                                         run_labels)
from bakeoff.results.report.envdiff import describe, env_diff
from bakeoff.results.report.headline_facts import (CLOCK_APART_REL, clock_limits, clock_limits_note,
                                                   headline_quality, noise_word,
                                                   noise_word_reasons, outside_kernels_ms, shown_clock_mhz,
                                                   typical_clock_mhz)
from bakeoff.results.report.compare_latency import NVML_WINDOW, latency_clock
from bakeoff.results.report.html import Cell, esc, table
from bakeoff.results.report.decision import speed_of


def _n(value: Any, fmt: str, suffix: str = "") -> Cell:
    x = fnum(value)
    return Cell("-" if x is None else format(x, fmt) + suffix, x, "num")


def _clock(c: dict[str, Any]) -> Cell:
    """The headline's SM clock (MHz, the median over its samples); where the record has none (older stores, host
    timing), NVML's median over the timing window, said so: it is the whole window's clock, not the headline's."""
    mhz, source = latency_clock(c)
    if source == NVML_WINDOW:
        return Cell(f"{mhz:.0f} (NVML, window)", mhz, "num dim")
    return _n(mhz, ".0f")


def _status(c: dict[str, Any]) -> Cell:
    status = str(c.get("status") or "?")
    cls = "ok" if status == "ok" else ("dim" if status == "skipped" else "bad")
    reason = c.get("reason")
    text = esc(status) + (f'<br><span class="note">{esc(str(reason)[:160])}</span>' if reason and status != "ok"
                          else "")
    return Cell(text, status, cls, raw=True)


def _noise(c: dict[str, Any]) -> Cell:
    """The noise column as the terminal's --wide says it (headline_facts.noise_word), the reasons folded under the
    word (noise_word_reasons); '-' for a case that was not timed."""
    word = noise_word(c)
    if word is None:
        return Cell("-", "")
    if word == "clean":
        return Cell("clean", word)
    return _reasons_cell(word, noise_word_reasons(c), "warn" if word == "noisy" else "dim")


def _reasons_cell(word: str, reasons: list[str], cls: str) -> Cell:
    """`word (n)` over its reasons, folded: they run to hundreds of characters and made every row of a loaded
    machine's run tall."""
    items = "".join(f"<li>{esc(r)}</li>" for r in reasons)
    return Cell(f'<details class="noise"><summary>{word} ({len(reasons)})</summary><ul class="note">{items}</ul>'
                "</details>" if reasons else word, word, cls, raw=True)


def _latency(c: dict[str, Any], typical_mhz: float | None = None) -> Cell:
    """The headline latency [p20–p80], its method underneath; its SM clock where that stands apart from the
    run's typical one or the samples spread with it (as the terminal's --wide); time outside the kernels where a
    call has much of it."""
    med, (lo, hi) = headline_ms(c), headline_spread(c)
    if med is None:
        return Cell("-", None, "num")
    spread = f" [{lo:.3g}–{hi:.3g}]" if lo is not None and hi is not None else ""
    how = headline_method(c)
    note = f'<br><span class="note">{esc(how)}</span>' if how else ""
    mhz = shown_clock_mhz(c, typical_mhz)
    if mhz is not None:
        why = ("its samples spread with the SM clock and are steady in SM cycles (each call's clock read on the "
               "device): an exact figure at a clock that moved" if headline_quality(c) == "clock" else
               f"more than {CLOCK_APART_REL:.0%} from the run's typical {typical_mhz:.0f} MHz")
        limits = clock_limits(c)
        why += f"; NVML says the {' and the '.join(limits)} held it" if limits else ""
        note += (f'<br><span class="note warn" title="the headline\'s SM clock, {esc(why)}: a compute-bound latency '
                 f'moves with the clock; the speedup, eager timed beside it, is the figure to compare">'
                 f'@ {mhz:.0f} MHz{esc(clock_limits_note(c))}</span>')
    outside = outside_kernels_ms(c)
    if outside is not None:
        note += (f'<br><span class="note" title="one synchronized call (host clock) takes this much longer than its '
                 f'kernels\' span: time no kernel accounts for, such as an allocation in every call">'
                 f'+{outside:.3g} ms outside kernels</span>')
    return Cell(f"{med:.4g}{esc(spread)}{note}", med, "num", raw=True)


def _speedup(c: dict[str, Any]) -> Cell:
    """The speedup over eager with its 95% interval (report/decision.py says how it was had)."""
    s = speed_of(c)
    if s is None:
        return _n(c.get("speedup_vs_eager"), ".3g", "×")
    ci = "" if s.source == "exact" else f' <span class="note">[{s.low:.3g}–{s.high:.3g}]</span>'
    return Cell(f"{s.speedup:.3g}×{ci}", s.speedup, "num", raw=True)


def _pct(c: dict[str, Any]) -> Cell:
    """% of ceiling, marked when the case beat the calibrated ceiling (then capped at 100: see
    harness.measure.ceiling_share)."""
    pct = fnum(c.get("pct_of_ceiling"))
    if pct is None:
        return Cell("-", None, "num")
    if c.get("ceiling_exceeded"):
        raw = fnum(c.get("pct_of_ceiling_measured")) or pct
        return Cell(f"{pct:.1f}% ⚑ ({raw:.1f}% of the calibrated ceiling: re-run bakeoff calibrate)", pct, "num warn")
    return Cell(f"{pct:.1f}%", pct, "num")


def _warm(c: dict[str, Any]) -> Cell:
    warm = fnum(c.get("compile_warm_s"))
    if warm is None and c.get("warm_error"):  # the cold compile ran; the warm one did not: why, on hover
        return Cell(f'<span title="{esc(c.get("warm_error"))}">failed</span>', None, "num warn", raw=True)
    if warm is None:
        return Cell("-", None, "num")
    hit = c.get("cache_hit_warm")
    return Cell(f"{warm:.3g}" + ("" if hit is None else (" hit" if hit else " miss")), warm, "num")


def _code_link(c: dict[str, Any], index: int | None) -> Cell:
    if index is None:
        return Cell("-")
    return Cell(f'<a href="#code" class="open-code" data-case="{index}" data-backend="{esc(c.get("backend"))}">'
                "code</a>", None, raw=True)


def runs_table_html(runs: list[RunData], case_of: dict[tuple[str, str, str, str], int] | None = None) -> str:
    """One sortable row per case of every run; `case_of` (code_view) links each case to its code."""
    labels = run_labels(runs)
    headers = (["run"] if len(runs) > 1 else []) + [
        "workload", "shape", "dtype", "backend", "status", "noise", "latency ms [p20–p80] (headline)",
        "speedup vs eager [95%]", "device span ms", "kernel sum ms", "pipelined ms", "single call ms", "timer ms",
        "SM clock MHz (headline)", "compile s cold", "compile s warm", "process setup s", "err vs fp64 (rel L2)",
        "× eager's error", "kernels", "% of ceiling", "break-even calls", "code"]
    body = []
    for r in runs:
        typical_mhz = typical_clock_mhz(r.cases)
        for c in r.cases:
            row = [Cell(labels[r.run_id] or r.run_id)] if len(runs) > 1 else []
            row += [Cell(str(c.get(k) or ""), str(c.get(k) or "")) for k in ("workload", "shape", "dtype", "backend")]
            row += [_status(c), _noise(c), _latency(c, typical_mhz), _speedup(c),
                    _n(c.get("device_span_ms"), ".4g"), _n(c.get("device_ms"), ".4g"), _n(c.get("pipelined_ms"), ".4g"),
                    _n(c.get("host_latency_ms"), ".4g"), _n(c.get("latency_ms_median"), ".4g"),
                    _clock(c), _n(c.get("compile_s"), ".3g"), _warm(c),
                    _n(c.get("compile_process_setup_s"), ".3g"), _n(c.get("err_rel_l2_vs_fp64"), ".2e"),
                    _n(c.get("err_ratio_vs_eager"), ".3g"), _n(c.get("kernel_count"), ".0f"), _pct(c),
                    _n(c.get("break_even_calls"), ",.0f"),
                    _code_link(c, (case_of or {}).get((r.run_id, str(c.get("workload")), str(c.get("shape")),
                                                       str(c.get("dtype")))))]
            body.append(row)
    return table(headers, body, table_id="cases")


ENV_ROWS = ("device", "gpu_name", "driver", "cuda_runtime", "compute_capability", "gpu_memory_mb", "cpu_model",
            "cpu_count", "python", "platform", "hostname", "harness_rev", "fingerprint", "load_avg")


def _env_getter(key: str) -> Callable[[RunData], Any]:
    return lambda r: r.env.get(key)


def _version_getter(name: str) -> Callable[[RunData], Any]:
    return lambda r: (r.env.get("versions") or {}).get(name)


def environment_table(runs: list[RunData]) -> str:
    """Each run's environment side by side, package versions included; differing rows marked."""
    labels = run_labels(runs)
    headers = ["field"] + [f"{labels[r.run_id]} {r.run_id}".strip() for r in runs]
    names = sorted({n for r in runs for n in (r.env.get("versions") or {})})
    fields: list[tuple[str, Callable[[RunData], Any]]] = [
        ("run status", lambda r: r.run.get("status")), ("config", lambda r: r.run.get("config_name")),
        ("started", lambda r: r.run.get("started_at"))]
    fields += [(k, _env_getter(k)) for k in ENV_ROWS]
    fields += [(f"versions.{n}", _version_getter(n)) for n in names]
    fields += [("ceilings", lambda r: ", ".join(f"{k}={v:.4g}" for k, v in sorted(r.ceilings.items())) or None)]
    body = []
    for name, get in fields:
        values = [get(r) for r in runs]
        differs = len({json.dumps(v, default=str) for v in values}) > 1 and name not in ("started", "load_avg")
        body.append([Cell(name, cls="warn" if differs else "")] +
                    [Cell("-" if v is None else (json.dumps(v) if isinstance(v, list | dict) else str(v)),
                          cls="warn" if differs else "") for v in values])
    return table(headers, body, sortable=False, table_id="environment")


def fingerprint_warning(runs: list[RunData]) -> str:
    """A banner when the runs shown come from different environment fingerprints, naming what differs."""
    if len({r.run.get("fingerprint") for r in runs}) <= 1:
        return ""
    first = runs[0]
    lines = [f"{r.run_id} ({hardware_name(r.env)}) vs {first.run_id}: {describe(env_diff(first.env, r.env))}"
             for r in runs[1:] if r.run.get("fingerprint") != first.run.get("fingerprint")]
    return ('<div class="banner warn" id="fingerprint-warning">Warning: these runs come from different environment '
            "fingerprints, so their numbers are not measured under the same conditions.<ul>"
            + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul></div>")
