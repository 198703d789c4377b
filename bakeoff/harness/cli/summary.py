"""The summary table of a run's records (rich), as printed by `bakeoff run` and `bakeoff show`.

The default view fits the console (100 columns is the design width): one row per workload, shape and dtype,
one column per backend holding the median latency (ms) over the speedup vs eager, failures marked and their
reasons listed under the table. Backends that do not fit are continued in a second table, never squeezed:
no value is wrapped or cut (every column is no_wrap; shapes are folded at their commas only). `--wide` is
the full table, one row per case, at its natural width. Every data value is a rich Text, never markup.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from bakeoff.harness.cli.cells import STATUS_STYLE, fmt_ms, stored_flat
from bakeoff.harness.cli.sweep_summary import sweep_lines
from bakeoff.results.report.headline_facts import (CLOCK_APART_REL, clock_limits_note, headline_quality,
                                                   judged_on_its_own, noise_word, outside_kernels_ms,
                                                   shown_clock_mhz, speedup_interval, speedup_quality,
                                                   typical_clock_mhz)

__all__ = ["CompactSummary", "STATUS_STYLE", "fmt_ms", "fmt_speedup", "fold_at_commas", "print_summary",
           "terminal_summary", "wide_table"]

# The short words of failed cells in the compact view (the full status is in the notes and in --wide).
STATUS_MARK = {"mismatch": "✗ mismatch", "compile_error": "✗ compile", "runtime_error": "✗ runtime",
               "timeout": "✗ timeout", "oom": "✗ oom", "crash": "✗ crash", "skipped": "skipped"}
MIN_CASE_WIDTH = 12  # the case column folds shapes to at least this width
NOISY_MARK = " ~"  # after a cell's second line: the headline's own samples were noisy (headline_quality)
UNBOUNDED = 10_000  # columns: a width no table reaches, to measure one's natural width


def fmt_speedup(value: float | None) -> str:
    """'1.23×', '0.05×', '150×'; '-' when missing."""
    if value is None:
        return "-"
    return f"{value:.3g}×" if value < 1000 else f"{value:.0f}×"


def fold_at_commas(text: str, width: int) -> str:
    """`text` broken into lines of at most `width` characters at its commas only (a part longer than
    `width` stays whole: it is never split)."""
    lines: list[str] = []
    for part in text.split(","):
        if lines and len(lines[-1]) + 1 + len(part) <= width:
            lines[-1] += "," + part
        else:
            if lines:
                lines[-1] += ","
            lines.append(part)
    return "\n".join(lines)


@dataclass(frozen=True)
class _Row:
    """One workload, shape and dtype, with its record per backend label."""

    workload: str
    shape: str
    dtype: str
    cells: dict[str, dict[str, Any]]


def _rows(records: list[dict[str, Any]]) -> tuple[list[_Row], list[str]]:
    """Rows in first-seen order, and the backend labels in first-seen order."""
    rows: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    backends: list[str] = []
    for r in records:
        key = (str(r.get("workload") or ""), str(r.get("shape") or ""), str(r.get("dtype") or ""))
        label = str(r.get("backend") or "")
        rows.setdefault(key, {})[label] = r
        if label not in backends:
            backends.append(label)
    return [_Row(*key, cells) for key, cells in rows.items()], backends


def _compact_cell(r: dict[str, Any] | None) -> Text:
    """Median latency over speedup (ok), or over the failure mark; eager's own row says 'baseline'."""
    if r is None:
        return Text("not run", style="dim")
    status = str(r.get("status") or "?")
    ms = r.get("headline_ms") if r.get("headline_ms") is not None else r.get("latency_ms_median")
    latency = fmt_ms(ms) if ms is not None else ""  # the headline: the figure the speedup divides
    if status == "ok":
        speedup = r.get("speedup_vs_eager")
        if r.get("adapter") == "eager":
            second = Text("baseline", style="dim")
        else:
            second = Text(fmt_speedup(speedup), style="green" if speedup and speedup >= 1 else "yellow")
        if speedup_quality(r) == "noisy":  # the figure the mark sits beside: the speedup (eager's own: latency)
            second.append(NOISY_MARK, style="yellow")
        return Text.assemble(Text(latency or "-"), "\n", second)
    mark = Text(STATUS_MARK.get(status, f"✗ {status}"), style=STATUS_STYLE.get(status, "red"))
    return Text.assemble(Text(latency, style="dim"), "\n", mark)


def _case_cell(row: _Row, width: int, show_dtype: bool) -> Text:
    lines = [Text(row.workload, style="bold"), Text(fold_at_commas(row.shape, width))]
    if show_dtype:
        lines.append(Text(row.dtype, style="dim"))
    return Text("\n").join(lines)


def _compact_table(rows: list[_Row], backends: list[str], case_width: int, show_dtype: bool) -> Table:
    t = Table(box=box.SIMPLE_HEAD, header_style="bold", pad_edge=False,
              show_edge=False, collapse_padding=True)
    t.add_column(Text("case"), no_wrap=True, overflow="ellipsis")
    for name in backends:
        t.add_column(Text(name), justify="right", no_wrap=True, overflow="ellipsis")
    for i, row in enumerate(rows):
        t.add_row(_case_cell(row, case_width, show_dtype), *(_compact_cell(row.cells.get(b)) for b in backends),
                  end_section=i < len(rows) - 1)
    return t


def _notes(records: list[dict[str, Any]], shown: set[str], all_skipped: dict[str, str]) -> list[Text]:
    """Why cases failed or were skipped, and where an ok case's warm compile failed, one line per (backend,
    status, reason); and the hidden backends."""
    out: list[Text] = []
    for label, reason in all_skipped.items():
        out.append(Text.assemble(Text(label, style="bold"), Text(": every case skipped: ", style="dim"),
                                 Text(reason)))
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in records:
        status = str(r.get("status") or "?")
        label = str(r.get("backend") or "")
        reason = r.get("reason")
        if status == "ok" and r.get("warm_error"):
            status, reason = "warm compile failed", r.get("warm_error")
        if status == "ok" or label not in shown:
            continue
        key = (label, status, str(reason or "no reason recorded").strip().splitlines()[0][:300])
        groups.setdefault(key, []).append(f"{r.get('workload')} [{r.get('shape')}, {r.get('dtype')}]")
    for (label, status, reason), cases in groups.items():
        where = cases[0] if len(cases) == 1 else f"{len(cases)} cases ({cases[0]} and {len(cases) - 1} more)"
        out.append(Text.assemble(Text(label, style="bold"), " ", Text(status, style=STATUS_STYLE.get(status, "red")),
                                 " in ", Text(where), ": ", Text(reason, style="dim")))
    return out


def _skipped_everywhere(rows: list[_Row], backends: list[str]) -> dict[str, str]:
    """The backends skipped in every case they have (a column of 'skipped' says nothing), with the first
    skip reason of each."""
    out = {}
    for b in backends:
        cells = [r.cells[b] for r in rows if b in r.cells]
        if all(c.get("status") == "skipped" for c in cells):
            out[b] = str(cells[0].get("reason") or "no reason recorded")
    return out


def natural_width(console: Console, renderable: RenderableType) -> int:
    """The width `renderable` takes when given all it wants (rich clamps measurements to the console's)."""
    return Measurement.get(console, console.options.update(width=UNBOUNDED), renderable).maximum


def _fits(console: Console, options: ConsoleOptions, table: Table) -> bool:
    return natural_width(console, table) <= options.max_width


class CompactSummary:
    """The default view; lays itself out for the width it is rendered at (see the module docstring)."""

    def __init__(self, records: Iterable[dict[str, Any]], title: str = "") -> None:
        self.records = [stored_flat(r) for r in records]
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.records:
            yield Text("no records", style="dim")
            return
        rows, backends = _rows(self.records)
        all_skipped = _skipped_everywhere(rows, backends)
        shown = [b for b in backends if b not in all_skipped] or backends  # all skipped: show them all
        all_skipped = {b: v for b, v in all_skipped.items() if b not in shown}
        dtypes = {r.dtype for r in rows}
        title = self.title + (f" · {next(iter(dtypes))}" if len(dtypes) == 1 and self.title else "")
        case_width = max([MIN_CASE_WIDTH] + [len(r.workload) for r in rows])
        if title:
            yield Text(title, style="bold")
        for i, group in enumerate(self._groups(console, options, rows, shown, case_width, len(dtypes) > 1)):
            if i:
                yield Text("")
            yield _compact_table(rows, group, case_width, len(dtypes) > 1)
        notes = _notes(self.records, set(shown), all_skipped)
        noisy = [r for r in self.records if speedup_quality(r) == "noisy" and r.get("backend") in shown]
        yield Text("cells: median latency ms over speedup vs eager (eager timed interleaved in each case)"
                   + ("; ✗ = failed, why below" if notes else "")
                   + (f";{NOISY_MARK} = {noisy_legend(noisy)}" if noisy else "")
                   + "; --wide: spread, SM clock, speedup interval, compile times, errors", style="dim")
        yield from notes

    @staticmethod
    def _groups(console: Console, options: ConsoleOptions, rows: list[_Row], backends: list[str],
                case_width: int, show_dtype: bool) -> Iterator[list[str]]:
        """The backends in runs that fit the width beside the case column (at least one per table)."""
        group: list[str] = []
        for name in backends:
            trial = group + [name]
            if group and not _fits(console, options, _compact_table(rows, trial, case_width, show_dtype)):
                yield group
                trial = [name]
            group = trial
        if group:
            yield group


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def noisy_legend(noisy: list[dict[str, Any]], figure: str = "speedup") -> str:
    """What the noise mark means for these noisy records: for `figure` "speedup" (the compact table's mark) the
    speedup's paired samples where the records judge them, else the headline's own samples; for "headline" (the
    wide table's noise column) the headline's own samples; for records written before the headline was judged on
    its own, the case's overall measurement."""
    own = sum(judged_on_its_own(r) for r in noisy)
    new = "the headline's own samples were noisy (headline_noise_reasons in the record)"
    if figure == "speedup" and any(r.get("speedup_quality") is not None for r in noisy):
        new = ("the speedup's paired samples were noisy, for eager's own cases its latency's "
               "(speedup_noise_reasons, headline_noise_reasons in the record)")
    old = ("the case's measurement was noisy, host load included (noise_reasons; a record from before the headline "
           "was judged on its own)")
    return new if own == len(noisy) else (old if own == 0 else f"{new}; else {old}")


def _latency(r: dict[str, Any], typical_mhz: float | None = None) -> Text:
    """The headline latency [p20–p80] (harness.measure.figures), the timer's for records without one; then
    '@ 1830 MHz' where the headline's SM clock is CLOCK_APART_REL or more from the run's typical one, or where
    its spread was the clock's (headline_facts.shown_clock_mhz), with what held the clock ('(power cap)',
    headline_facts.clock_limits_note); then
    '+30.5 outside kernels' where the single synchronized call takes that much longer than the kernels' span."""
    new = r.get("headline_ms") is not None
    med = r.get("headline_ms") if new else r.get("latency_ms_median")
    if med is None:
        return Text("-")
    lo, hi = (r.get("headline_p20_ms"), r.get("headline_p80_ms")) if new else (r.get("latency_ms_p20"),
                                                                               r.get("latency_ms_p80"))
    spread = f" [{fmt_ms(lo)}–{fmt_ms(hi)}]" if lo is not None and hi is not None else ""
    text = Text(f"{fmt_ms(med)}{spread}")
    mhz = shown_clock_mhz(r, typical_mhz)
    if mhz is not None:
        text.append(f" @ {mhz:.0f} MHz{clock_limits_note(r)}", style="yellow")
    outside = outside_kernels_ms(r)
    if outside is not None:
        text.append(f" +{fmt_ms(outside)} outside kernels", style="yellow")
    return text


def _speedup(r: dict[str, Any]) -> str:
    """'1.23×' with its 95% interval ' [1.18–1.29]' where the record has one."""
    speedup = r.get("speedup_vs_eager")
    if not speedup:
        return "-"
    ci = speedup_interval(r)
    return fmt_speedup(speedup) + (f" [{ci[0]:.3g}–{ci[1]:.3g}]" if ci else "")


def _compile(r: dict[str, Any]) -> str:
    cold, warm = r.get("compile_s"), r.get("compile_warm_s")
    if cold is None:
        return "-"
    text = f"{cold:.3g}"
    if warm is not None:
        hit = r.get("cache_hit_warm")
        text += f" / {warm:.3g}" + ("" if hit is None else (" hit" if hit else " miss"))
    elif r.get("warm_error"):
        text += " / warm failed"
    return text


def _noise(r: dict[str, Any]) -> Text:
    """headline_facts.noise_word: 'noisy' (the headline's own samples; the case's measurement_quality for older
    records), 'clock' (their spread was the SM clock's), 'others' (only the other figures: host load, the timer's
    samples), '' when clean, '-' when not timed."""
    word = noise_word(r)
    if word is None:
        return Text("-")
    styles = {"noisy": "yellow", "clock": "cyan", "others": "dim"}
    return Text(word, style=styles[word]) if word in styles else Text("")


WIDE_COLUMNS = (("workload", "left"), ("shape", "left"), ("dtype", "left"), ("backend", "left"), ("status", "left"),
                ("noise", "left"), ("compile s cold / warm", "right"), ("latency ms [p20–p80]", "right"),
                ("speedup vs eager [95%]", "right"), ("err vs eager (rel L2)", "right"),
                ("err vs fp64 (rel L2)", "right"), ("× eager err", "right"))


def _wide_caption(records: list[dict[str, Any]], typical_mhz: float | None) -> Text:
    """What the noise column and the clock beside a latency mean, for the marks this table shows."""
    parts = []
    noisy = [r for r in records if headline_quality(r) == "noisy"]
    if noisy:
        parts.append(f"noise: {noisy_legend(noisy, 'headline')}")
    if any(noise_word(r) == "others" for r in records):
        parts.append("others: the headline is clean, other figures were noisy (host load, the timer's samples: "
                     "noise_reasons)")
    if any(headline_quality(r) == "clock" for r in records):
        parts.append("clock: the headline's samples spread with the GPU's SM clock and are steady in SM cycles (each "
                     "call's time x the clock read on the device around it): exact figures at a clock that moved, "
                     "not noise; the latency carries its clock (@ MHz) and the reasons stay in headline_noise_reasons")
    if any(shown_clock_mhz(r, typical_mhz) is not None for r in records):
        typical = f"typical {typical_mhz:.0f} MHz (median over its cases)" if typical_mhz else "typical clock"
        parts.append(f"@ MHz: the headline's SM clock, where it is more than {CLOCK_APART_REL:.0%} from the run's "
                     f"{typical} or its samples spread with the clock: a compute-bound latency moves with the "
                     "clock; the speedup, eager timed beside it at the same clock, is the figure to compare")
    if any(outside_kernels_ms(r) is not None for r in records):
        parts.append("outside kernels: ms by which one synchronized call (host clock) exceeds its kernels' span (the "
                     "headline): time in every call that no kernel accounts for, such as an allocation or host work "
                     "(host_latency_ms against device_span_ms)")
    return Text("\n".join(parts), style="dim", justify="left")


def wide_table(records: Iterable[dict[str, Any]], title: str = "") -> Table:
    """One row per case: status (and reason), noise, compile (cold / warm), latency median [p20–p80] (with the
    SM clock where it stands apart), speedup [95% interval] and errors. Meant to be printed at its natural
    width (print_summary)."""
    records = [stored_flat(r) for r in records]
    typical_mhz = typical_clock_mhz(records)
    caption = _wide_caption(records, typical_mhz)
    t = Table(title=Text(title) if title else None, show_lines=False, header_style="bold",
              caption=caption if caption.plain else None, caption_justify="left")
    for col, justify in WIDE_COLUMNS:
        t.add_column(Text(col), justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in records:
        status = str(r.get("status") or "?")
        reason = r.get("reason")
        status_text = Text(status, style=STATUS_STYLE.get(status, ""))
        if reason and status != "ok":
            status_text.append("\n" + str(reason).strip().splitlines()[0][:80], style="dim")
        t.add_row(*(Text(str(r.get(k) or "")) for k in ("workload", "shape", "dtype", "backend")), status_text,
                  _noise(r), Text(_compile(r)), _latency(r, typical_mhz),
                  *(Text(v) for v in (_speedup(r), _num(r.get("err_rel_l2_vs_eager"), ".2e"),
                                      _num(r.get("err_rel_l2_vs_fp64"), ".2e"),
                                      _num(r.get("err_ratio_vs_eager"), ".3g"))))
    return t


def terminal_summary(records: Iterable[dict[str, Any]], title: str = "", wide: bool = False) -> RenderableType:
    """The summary of `records`: the compact view (fits the console), or with `wide` the full table."""
    return wide_table(records, title) if wide else CompactSummary(records, title)


def print_summary(console: Console, records: Iterable[dict[str, Any]], title: str = "", wide: bool = False) -> None:
    """Print terminal_summary(); the wide table at its natural width even where that exceeds the console's
    (a terminal then folds long lines: pipe through `less -S`), so that no value is ever cut."""
    records = list(records)
    summary = terminal_summary(records, title, wide)
    sweeps = sweep_lines(records)
    if sweeps:  # one line per shape-sweep case (cli/sweep_summary.py)
        summary = Group(summary, *sweeps)
    if not wide:
        console.print(summary)
        return
    natural = natural_width(console, summary)
    if natural <= console.width:
        console.print(summary)
        return
    Console(file=console.file, width=natural, force_terminal=console.is_terminal,
            color_system=console.color_system, no_color=console.no_color).print(Group(summary))
