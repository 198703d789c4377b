"""The decision a page leads with, shared by the report and the dashboard's latest-run page: the scoreboard,
the speedup heatmap and the per-workload verdicts (report/decision.py, decision_tables.py)."""
from __future__ import annotations

from dataclasses import dataclass

from bakeoff.results.report.charts_heatmap import speedup_heatmap
from bakeoff.results.report.data import RunData
from bakeoff.results.report.decision import MIN_WIN_MARGIN_PCT, Verdict, scoreboard, verdicts
from bakeoff.results.report.decision_tables import scoreboard_table, verdict_table
from bakeoff.results.report.weights import Recommendation
from bakeoff.results.speedup_interval import LEVEL


@dataclass(frozen=True)
class Lead:
    """The runs' verdicts and the HTML of each part of the lead."""

    verdicts: list[Verdict]
    scoreboard: str
    heatmap: str

    def verdict_section(self, recs: list[Recommendation], several_runs: bool) -> str:
        ties = sum(v.is_tie for v in self.verdicts)
        return (f"<h2>Per workload</h2><p class=\"note\">{len(self.verdicts)} workload/shape/dtype groups; {ties} "
                f"tie(s): the fastest's {LEVEL:.0%} interval overlaps another's or it leads by under "
                f"{MIN_WIN_MARGIN_PCT:g}%, so none is named.</p>"
                + verdict_table(self.verdicts, recs, several_runs))


def lead(runs: list[RunData]) -> Lead:
    """The scoreboard and the heatmap of `runs` (the heatmap's div id: speedup)."""
    found = verdicts(runs)
    dtypes = list(dict.fromkeys(v.dtype for v in found))
    return Lead(found, scoreboard_table(scoreboard(found, len(runs) > 1), dtypes),
                speedup_heatmap(runs) or '<p class="note">no cases</p>')
