"""What a run shows while its cases run: on a terminal a live bar naming the running case(s), ending on
`done`; elsewhere (a file, a pipe, a CI log, where a live bar prints nothing until the end) one plain line
per finished case: count, status, case, latency, speedup, elapsed and ETA."""
from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from bakeoff.harness.plan.cases import Case


def clock(seconds: float) -> str:
    """'0:01:05' (hours:minutes:seconds)."""
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def case_line(record: dict[str, Any]) -> str:
    """'layernorm_gelu [M=37,N=300, float32] inductor  0.495 ms  1.21×' (latency and speedup when measured)."""
    text = f"{record.get('workload')} [{record.get('shape')}, {record.get('dtype')}] {record.get('backend')}"
    ms = record.get("headline_ms") if record.get("headline_ms") is not None else record.get("latency_ms_median")
    speedup = record.get("speedup_vs_eager")
    if ms is not None:
        text += f"  {ms:.4g} ms"
    if speedup is not None and record.get("status") == "ok" and record.get("adapter") != "eager":  # eager: 1×
        text += f"  {speedup:.3g}×"
    return text


class RunProgress:
    """The progress of `todo` (the cases a session runs): `started` from any thread, `finished` per record.

    The ETA is the mean wall time of the executed cases so far times the executed cases left (skipped cases
    finish at once and count for neither)."""

    def __init__(self, console: Console, todo: list[Case]) -> None:
        self.console = console
        self.total = len(todo)
        self.to_execute = sum(1 for c in todo if not c.skip_reason)
        self.done = self.executed = 0
        self.t0 = time.monotonic()
        self._running: dict[str, None] = {}  # insertion-ordered set of case ids
        self._lock = threading.Lock()
        self.live = console.is_terminal
        self._bar: Progress | None = None

    def __enter__(self) -> "RunProgress":
        if self.live:
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 console=self.console, transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task("starting", total=self.total)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._bar is not None:
            if self.done == self.total:
                self._bar.update(self._task, description="done")
            elif exc_type is not None:
                self._bar.update(self._task, description="interrupted" if issubclass(exc_type, KeyboardInterrupt)
                                 else "stopped")
            self._bar.__exit__(exc_type, *exc)

    def started(self, case: Case) -> None:
        with self._lock:
            self._running[case.case_id] = None
            description = self._describe()
        if self._bar is not None:
            self._bar.update(self._task, description=escape(description))

    def finished(self, case: Case, record: dict[str, Any]) -> None:
        with self._lock:
            self._running.pop(case.case_id, None)
            self.done += 1
            self.executed += not case.skip_reason
            description = self._describe()
            elapsed = time.monotonic() - self.t0
            left = self.to_execute - self.executed
            eta = clock(elapsed / self.executed * left) if self.executed else "?"
            done = self.done
        if self._bar is not None:
            self._bar.update(self._task, description=escape(description), advance=1)
            return
        width = len(str(self.total))
        self.console.print(f"[{done:>{width}}/{self.total}] {str(record.get('status')):<13} {case_line(record)}  "
                           f"elapsed {clock(elapsed)}  ETA {eta if left else '0:00:00'}",
                           markup=False, highlight=False, soft_wrap=True)

    def _describe(self) -> str:
        if not self._running:
            return "done" if self.done == self.total else "waiting"
        first = next(iter(self._running))
        more = len(self._running) - 1
        return f"running {first}" + (f" (+{more} more)" if more else "")
