"""The dashboard's summary line says how many series could be judged, so "0 regression(s)" over a history too
short to judge anything is not read as a pass."""
from __future__ import annotations

import re

from bakeoff.results.report.dashboard import render_index
from bakeoff.results.report.history import History, Series
from bakeoff.results.report.trend import Point


def _series(points: list[Point]) -> Series:
    return Series("softmax", "M=8", "float32", "eager", "hw", "GPU", "headline_ms", points, None)


def _summary(h: History) -> str:
    html = render_index(h)
    return re.sub(r"<[^>]+>", "", re.search(r"<h1>bakeoff dashboard</h1><p>(.*?)</p>", html, re.S).group(1))


def test_the_summary_counts_the_series_judged_at_their_latest_point():
    runs = [{"run_id": f"r{i}", "environment": {}} for i in range(2)]
    young = _series([Point("r0", 0, 1.0, {}), Point("r1", 1, 1.0, {})])  # no baseline yet: not judged
    h = History(runs, [young], [])
    text = _summary(h)
    assert "1 series, 0 of them judged at their latest point" in text and "0 regression(s)" in text
    assert 'class="dim" id="summary"' in render_index(h)  # not green: nothing was judged
    judged = _series([Point("r0", 0, 1.0, {}), Point("r1", 1, 1.0, {}, baseline=1.0, limit=1.05)])
    h = History(runs, [young, judged], [])
    assert "2 series, 1 of them judged" in _summary(h) and 'class="ok" id="summary"' in render_index(h)


def test_the_command_line_summary_counts_accuracy_and_status_flags_as_regressions():
    from bakeoff.results.report.dashboard import summary_line
    from bakeoff.results.report.history import CaseHistory
    from bakeoff.results.report.trend import Flag

    runs = [{"run_id": f"r{i}", "environment": {}} for i in range(2)]
    step = Series("softmax", "M=8", "float32", "eager", "hw", "GPU", "headline_ms",
                  [Point("r0", 0, 1.0, {}), Point("r1", 1, 2.0, {}, baseline=1.0, limit=1.05, breach=True)],
                  Flag("suspicious", "last run breaches once"))
    flip = CaseHistory(("softmax", "M=8", "float32", "xla"), "hw", "GPU", [("r0", "ok"), ("r1", "mismatch")],
                       Flag("accuracy", "ok → mismatch"))
    h = History(runs, [step], [flip])
    assert summary_line(h) == "1 regression(s), 1 suspicious, 1 of 1 series judged"
    assert "1 regression(s)" in _summary(h)
