"""Shared pieces of the plotly charts: colours per series, the rows of a set of runs, the layout."""
from __future__ import annotations

from typing import Any, Iterator

import plotly.graph_objects as go
from plotly.colors import qualitative

from bakeoff.results.report.data import RunData, case_label, run_labels, series_name

PALETTE = qualitative.D3 + qualitative.Set2


def rows(runs: list[RunData]) -> Iterator[tuple[RunData, str, dict[str, Any]]]:
    """(run, run label, case) over every non-skipped case of every run."""
    labels = run_labels(runs)
    for r in runs:
        for c in r.cases:
            if c.get("status") != "skipped":
                yield r, labels[r.run_id], c


def series_colors(runs: list[RunData]) -> dict[str, str]:
    """One stable colour per series name (backend, or backend · run)."""
    names: list[str] = []
    for _, label, c in rows(runs):
        name = series_name(c, label)
        if name not in names:
            names.append(name)
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def case_order(runs: list[RunData]) -> list[str]:
    """Case labels ('workload [shape, dtype]') in first-seen order."""
    out: list[str] = []
    for _, _, c in rows(runs):
        if case_label(c) not in out:
            out.append(case_label(c))
    return out


def styled(fig: go.Figure, title: str, height: int = 480) -> go.Figure:
    """The common layout: a title, white template, legend on the right."""
    fig.update_layout(title=title, template="plotly_white", height=height, margin=dict(l=60, r=20, t=70, b=60),
                      hoverlabel=dict(align="left"))
    return fig
