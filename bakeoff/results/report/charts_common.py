"""Shared pieces of the plotly charts: colours and marks per series, the rows of a set of runs, the layout."""
from __future__ import annotations

from typing import Any, Iterator

import plotly.graph_objects as go

from bakeoff.results.report.colors import RUN_PATTERNS, RUN_SYMBOLS, backend_colors
from bakeoff.results.report.data import RunData, case_label, run_labels, series_name


def rows(runs: list[RunData]) -> Iterator[tuple[RunData, str, dict[str, Any]]]:
    """(run, run label, case) over every non-skipped case of every run."""
    labels = run_labels(runs)
    for r in runs:
        for c in r.cases:
            if c.get("status") != "skipped":
                yield r, labels[r.run_id], c


def series_colors(runs: list[RunData]) -> dict[str, str]:
    """The colour of each series name (backend, or backend · run): its backend's (colors.py), so a backend
    has one colour in every chart, whichever runs are shown."""
    pairs = [(series_name(c, label), str(c.get("backend"))) for _, label, c in rows(runs)]
    colors = backend_colors(b for _, b in pairs)
    return {name: colors[backend] for name, backend in pairs}


def series_marks(runs: list[RunData]) -> dict[str, tuple[str, str]]:
    """(bar pattern, marker symbol) of each series name: the run's, so that one backend's series of several
    runs share its colour and differ in pattern and symbol (a single run: plain bars, circles)."""
    order = {r.run_id: i for i, r in enumerate(runs)}
    return {series_name(c, label): (RUN_PATTERNS[order[r.run_id] % len(RUN_PATTERNS)],
                                    RUN_SYMBOLS[order[r.run_id] % len(RUN_SYMBOLS)]) for r, label, c in rows(runs)}


def case_order(runs: list[RunData]) -> list[str]:
    """Case labels ('workload [shape, dtype]') in first-seen order."""
    out: list[str] = []
    for _, _, c in rows(runs):
        if case_label(c) not in out:
            out.append(case_label(c))
    return out


def styled(fig: go.Figure, title: str, height: int = 480) -> go.Figure:
    """The common layout: a title, white template, a legend on the right (shown even for one series, so
    that every chart names what it draws)."""
    fig.update_layout(title=title, template="plotly_white", height=height, margin=dict(l=60, r=20, t=70, b=60),
                      hoverlabel=dict(align="left"), showlegend=True)
    return fig
