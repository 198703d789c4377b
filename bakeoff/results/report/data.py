"""Records read from the store as typed records (results/record.py) and as flat cases, with the keys and
labels the reports group by."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bakeoff.results.case_order import in_config_order
from bakeoff.results.stored_record import StoredRecord

# A case is the same across runs when these match (the backend is the config's label).
CASE_KEY = ("workload", "shape", "dtype", "backend")


@dataclass(frozen=True)
class RunData:
    """One run: its row from `runs` (environment included), its records flattened (`cases`: every field of
    the record model by name, then legacy fields) and, when loaded from a store, typed (`records`)."""

    run: dict[str, Any]
    cases: list[dict[str, Any]] = field(default_factory=list)
    ceilings: dict[str, float] = field(default_factory=dict)
    records: list[StoredRecord] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.run["run_id"]

    @property
    def env(self) -> dict[str, Any]:
        return self.run.get("environment") or {}


def load_run(store: Any, run_id: str) -> RunData:
    """A run with its typed and flattened records and the newest ceilings measured on its hardware."""
    run = store.run(run_id)
    records = store.case_records(run_id)
    flat = {id(f): (f, r) for r in records for f in [r.flat()]}
    ordered = in_config_order([f for f, _ in flat.values()], run.get("config_text"))  # not completion order
    ceilings = store.latest_ceilings(run.get("environment") or {})
    return RunData(run, ordered, ceilings, [flat[id(f)][1] for f in ordered])


def case_key(case: dict[str, Any]) -> tuple[str, str, str, str]:
    """(workload, shape, dtype, backend label)."""
    return tuple(str(case.get(k) or "") for k in CASE_KEY)  # type: ignore[return-value]


def case_label(case: dict[str, Any]) -> str:
    """'workload [shape, dtype]', the row label of charts."""
    return f"{case.get('workload')} [{case.get('shape')}, {case.get('dtype')}]"


def hardware_name(env: dict[str, Any]) -> str:
    """The GPU's name, else the CPU model."""
    return str(env.get("gpu_name") or env.get("cpu_model") or env.get("device") or "unknown device")


def run_labels(runs: list[RunData]) -> dict[str, str]:
    """A short label per run id: empty for a single run, else '#i' plus what sets it apart (GPU, torch)."""
    if len(runs) <= 1:
        return {r.run_id: "" for r in runs}
    labels = {}
    for i, r in enumerate(runs, 1):
        parts = []
        names = {hardware_name(x.env) for x in runs}
        if len(names) > 1:
            parts.append(hardware_name(r.env))
        torches = {(x.env.get("versions") or {}).get("torch") for x in runs}
        if len(torches) > 1:
            parts.append(f"torch {(r.env.get('versions') or {}).get('torch')}")
        labels[r.run_id] = f"#{i}" + (f" {' '.join(parts)}" if parts else f" {r.run_id}")
    return labels


def series_name(case: dict[str, Any], run_label: str) -> str:
    """A chart series: the backend, with the run's label when several runs are shown."""
    return f"{case.get('backend')} · {run_label}" if run_label else str(case.get("backend"))


# Unit roundoff (half the machine epsilon) per dtype name: a result rounded to the dtype has a relative error
# up to this much, so errors vs fp64 below it are rounding-level and not told apart.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8, "float64": 2.0**-53}


def unit_roundoff(dtype: Any) -> float:
    """UNIT_ROUNDOFF of a dtype name; float32's for an unknown one."""
    return UNIT_ROUNDOFF.get(str(dtype), UNIT_ROUNDOFF["float32"])


def first_result_s(case: dict[str, Any]) -> float | None:
    """Seconds from the graph to the first result (compile, module load or session, first run): what a
    user waits for with any backend, for this graph. Records with `compile_process_setup_s` hold the
    process's one-time start (imports, compiler start) apart; older ones include it. Records before
    compile_total_s existed have only compile_s."""
    return fnum(case.get("compile_total_s")) or fnum(case.get("compile_s"))


def headline_ms(case: dict[str, Any]) -> float | None:
    """The case's headline latency (ms): the one figure measured the same way for every backend (CUPTI span
    on a GPU, the timer on the CPU; harness.measure.figures); the timer's median for older records."""
    return fnum(case.get("headline_ms")) or fnum(case.get("latency_ms_median"))


def headline_spread(case: dict[str, Any]) -> tuple[float | None, float | None]:
    """(p20, p80) of the headline, the timer's for older records."""
    if fnum(case.get("headline_ms")) is not None:
        return fnum(case.get("headline_p20_ms")), fnum(case.get("headline_p80_ms"))
    return fnum(case.get("latency_ms_p20")), fnum(case.get("latency_ms_p80"))


def headline_samples(case: dict[str, Any]) -> list[float]:
    """The samples the headline is the median of: CUPTI spans, or the timer's samples (CPU and older
    records); none for the pipelined fallback, which is one figure per batch of calls."""
    if fnum(case.get("headline_ms")) is None:
        return list(case.get("samples_ms") or [])
    method = headline_method(case)
    if method == "cupti-span":
        return list(case.get("device_span_samples_ms") or [])
    if method == case.get("timing_method"):
        return list(case.get("samples_ms") or [])
    return []


def metric_value(case: dict[str, Any], metric: str) -> float | None:
    """A compare/trend metric of a record: `headline_ms` is the headline (the timer's median for older
    records); other metrics are the record's field of that name."""
    return headline_ms(case) if metric == "headline_ms" else fnum(case.get(metric))


def headline_method(case: dict[str, Any]) -> str:
    """How the headline was measured (`headline_method`; the timer's `timing_method` for older records)."""
    return str(case.get("headline_method") or case.get("timing_method") or "")


def fnum(value: Any) -> float | None:
    """A finite float, or None for missing values and non-numbers."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if x == x and abs(x) != float("inf") else None
