"""The store's history as series: one metric of one case on one kind of device, in run order, judged."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bakeoff.results.export import flatten

from bakeoff.results.hardware import hardware_id
from bakeoff.results.report.data import case_key, hardware_name, metric_value
from bakeoff.results.report.trend import MIN_RISE, Flag, Point, flag_series, flag_status, judge

METRICS = tuple(MIN_RISE)
# What a point keeps of its record: what says whether two points are comparable, and whether it was noisy.
POINT_FIELDS = ("graph_digest", "options_digest", "options", "timing_digest", "timing_settings", "timing_method",
                "headline_method",
                "seeds", "measurement_quality", "noise_reasons", "headline_quality", "headline_noise_reasons")


@dataclass(frozen=True)
class Series:
    """(workload, shape, dtype, backend, device) × metric over runs, oldest first, with its flag."""

    workload: str
    shape: str
    dtype: str
    backend: str
    hardware: str  # hardware_id
    device_name: str
    metric: str
    points: list[Point]
    flag: Flag | None

    @property
    def name(self) -> str:
        return f"{self.backend} · {self.shape} · {self.dtype} · {self.device_name} [{self.hardware}]"


@dataclass(frozen=True)
class CaseHistory:
    """A case's statuses run after run on one kind of device, and the pass → fail flag if any."""

    key: tuple[str, str, str, str]
    hardware: str
    device_name: str
    statuses: list[tuple[str, str]]  # (run_id, status)
    flag: Flag | None


@dataclass(frozen=True)
class History:
    runs: list[dict[str, Any]]  # oldest first
    series: list[Series]
    cases: list[CaseHistory]


def load_history(store: Any) -> History:
    """Every run of the store, oldest first, grouped into series and judged (see trend)."""
    runs = list(reversed(store.runs()))
    values: dict[tuple, list[Point]] = {}
    statuses: dict[tuple, list[tuple[str, dict[str, Any], str | None, str]]] = {}
    names: dict[str, str] = {}
    for run in runs:
        env = run.get("environment") or {}
        hw = hardware_id(env)
        names[hw] = hardware_name(env)
        for rec in store.records(run["run_id"]):
            c = flatten(rec)
            key = case_key(c) + (hw,)
            statuses.setdefault(key, []).append((str(c.get("status")), env, c.get("reason"), run["run_id"]))
            if c.get("status") != "ok":
                continue
            for metric in METRICS:
                v = metric_value(c, metric)
                if v is not None:
                    values.setdefault(key + (metric,), []).append(
                        Point(run["run_id"], run["started_at"], v, env, rec={k: c.get(k) for k in POINT_FIELDS}))
    series = []
    for (wl, shape, dtype, backend, hw, metric), pts in values.items():
        judged = judge(pts, metric)
        series.append(Series(wl, shape, dtype, backend, hw, names[hw], metric, judged, flag_series(judged)))
    cases = [CaseHistory(key[:4], key[4], names[key[4]], [(s[3], s[0]) for s in sts],
                         flag_status([(s[0], s[1], s[2]) for s in sts]))
             for key, sts in statuses.items()]
    return History(runs, series, cases)
