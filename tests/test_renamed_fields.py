"""Record fields renamed so that their names carry their unit (results/renamed_fields.py): a store written under
the old names (a `records` column, keys of `details`, keys inside `gpu_other_processes`) opens, and every reader
sees the current names only: the raw rows, the typed record, the export, compare (its U test on the samples),
the report's speedup interval, the dashboard's history and the terminal's time split."""
from __future__ import annotations

import json
import random

from sqlalchemy import create_engine, text

from bakeoff.harness.cli.overhead import elapsed_split
from bakeoff.results.export import export_records
from bakeoff.results.renamed_fields import RENAMED, current_names
from bakeoff.results.report.compare import compare_runs
from bakeoff.results.report.data import load_run
from bakeoff.results.report.decision import speed_of
from bakeoff.results.report.history import load_history
from bakeoff.results.schema import SCHEMA_VERSION
from bakeoff.results.store import Store
from bakeoff.results.stored_record import StoredRecord
from test_store_migrations import make_v1_store

KEY = {"workload": "gemm", "shape": "M=64", "dtype": "bfloat16", "backend": "inductor"}
CASE_ID = "gemm/M=64/bfloat16/inductor"


def _spans(median_ms: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [median_ms * (1 + rng.uniform(-0.01, 0.01)) for _ in range(30)]


def _figures(ms: float, seed: int) -> dict:
    """A GPU case's headline figures (the CUPTI span), eager at 2 ms beside it."""
    return {"headline_method": "cupti-span", "timing_method": "cuda-events", "headline_ms": ms,
            "headline_p20_ms": ms * 0.995, "headline_p80_ms": ms * 1.005, "eager_headline_ms": 2.0,
            "speedup_vs_eager": 2.0 / ms, "latency_ms_median": ms, "eager_latency_ms_median": 2.0,
            "compile_s": 10.0, "wall_s": 30.0}


def _old_details(ms: float) -> dict:
    """What an older bakeoff kept in `details`, under the old names."""
    return {**_figures(ms, 0), "eager_samples": _spans(2.0, 1), "device_span_samples": _spans(ms, 2),
            "eager_device_span_samples": _spans(2.0, 3), "timing_windows": [[1000.0, 1005.0]],
            "compile_windows": [[990.0, 1000.0]],
            "gpu_other_processes": [{"pid": 7, "sm_util": 12, "mem_util": 3, "gated_sibling": True}]}


def _old_store(url: str) -> None:
    """A v1 store (tests/data/schema_v1_*.sql) holding the run 'old-gpu': one case whose timer samples are the
    `samples` column and whose other renamed fields are `details` keys, as bakeoff wrote them before."""
    make_v1_store(url)
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO runs (run_id, started_at, ended_at, status, config_name, device, "
                          "environment, schema_version, n_cases) VALUES ('old-gpu', '2026-01-01 00:00:00', "
                          "'2026-01-01 00:01:00', 'complete', 'g', 'cuda:0', :env, 1, 1)"),
                     {"env": json.dumps({"fingerprint": "f", "gpu_name": "NVIDIA H200"})})
        conn.execute(text("INSERT INTO records (run_id, case_id, workload, shape, dtype, backend, status, "
                          "n_samples, samples, details, created_at) VALUES ('old-gpu', :case_id, :workload, "
                          ":shape, :dtype, :backend, 'ok', 30, :samples, :details, '2026-01-01 00:01:00')"),
                     {"case_id": CASE_ID, **KEY, "samples": json.dumps(_spans(1.0, 4)),
                      "details": json.dumps(_old_details(1.0))})
    engine.dispose()


def _new_run(store: Store, ms: float) -> str:
    """A run written now, under the current names, with the same case `ms` per call."""
    run_id = store.create_run(config_name="g", config_path=None, config_text="", device="cuda:0",
                              environment={"fingerprint": "f", "gpu_name": "NVIDIA H200"}, n_cases=1)
    assert store.add_record(run_id, {"case_id": CASE_ID, **KEY, "status": "ok", **_figures(ms, 0),
                                     "n_samples": 30, "samples_ms": _spans(ms, 4), "eager_samples_ms": _spans(2.0, 5),
                                     "device_span_samples_ms": _spans(ms, 6),
                                     "eager_device_span_samples_ms": _spans(2.0, 7)})
    store.finish_run(run_id, "complete")
    return run_id


def test_an_old_store_reads_under_the_new_names(store_url):
    _old_store(store_url)
    store = Store(store_url)
    assert store.upgraded_to == list(range(2, SCHEMA_VERSION + 1))
    (row,) = store.records("old-gpu")
    old_names = set(RENAMED)
    assert row["samples_ms"] == _spans(1.0, 4) and not old_names & set(row) and not old_names & set(row["details"])
    assert row["details"]["device_span_samples_ms"] == _spans(1.0, 2)
    assert row["details"]["gpu_other_processes"] == [{"pid": 7, "sm_util_pct": 12, "mem_util_pct": 3,
                                                      "gated_sibling": True}]
    (rec,) = store.case_records("old-gpu")
    assert rec.legacy_fields is None  # nothing left under an old name
    assert rec.timer.samples_ms == _spans(1.0, 4) and rec.eager_timer.samples_ms == _spans(2.0, 1)
    assert rec.device_time.span_samples_ms == _spans(1.0, 2)
    assert rec.eager_device_time.span_samples_ms == _spans(2.0, 3)
    assert rec.timing_windows_epoch_s == [(1000.0, 1005.0)] and rec.compile_windows_epoch_s == [(990.0, 1000.0)]
    assert rec.gpu_other_processes[0].sm_util_pct == 12 and rec.gpu_other_processes[0].mem_util_pct == 3
    (exported,) = json.loads(export_records(store.records("old-gpu"), "json", None))
    assert list(exported) == StoredRecord.export_columns()  # the current columns, no legacy ones
    assert exported["eager_device_span_samples_ms"] == _spans(2.0, 3)
    # the terminal's time split reads the windows
    split = elapsed_split(store.records("old-gpu"), 60.0)
    assert split is not None and split["measuring_s"] == 15.0 and split["timing_s"] == 5.0


def test_compare_report_and_dashboard_read_an_old_run_beside_a_new_one(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    _old_store(url)
    store = Store(url)
    slower = _new_run(store, 1.3)
    old, new = load_run(store, "old-gpu"), load_run(store, slower)
    for base, cand, verdict in ((old, new, "regressed"), (new, old, "improved")):
        (case,) = compare_runs(base, cand).cases
        latency = next(m for m in case.changes if m.metric == "headline_ms")
        # the U test ran on the CUPTI spans of both sides: 30 against 30 disjoint samples
        assert latency.p_value is not None and latency.p_value < 1e-9 and latency.verdict == verdict
    # the report's speedup interval is bootstrapped from the old run's paired samples
    speed = speed_of(old.cases[0])
    assert speed.source == "bootstrap (from samples)" and speed.low < 2.0 < speed.high
    history = load_history(store)
    series = [s for s in history.series if s.metric == "headline_ms" and s.backend == "inductor"]
    assert [len(s.points) for s in series] == [2]


def test_current_names_keeps_a_value_under_the_current_name():
    assert current_names({"samples": [1.0], "details": {"eager_samples": [2.0]}}) == {
        "samples_ms": [1.0], "details": {"eager_samples_ms": [2.0]}}
    # both names: the current one's value stands; the old one stays (a legacy field)
    both = current_names({"samples": [1.0], "samples_ms": [3.0]})
    assert both == {"samples": [1.0], "samples_ms": [3.0]}
    assert current_names({"samples": [1.0], "samples_ms": None}) == {"samples_ms": [1.0]}
    rec = StoredRecord.from_row({"case_id": "a", "status": "ok", "samples": [1.0], "samples_ms": [3.0]})
    assert rec.timer.samples_ms == [3.0] and rec.legacy_fields == {"samples": [1.0]}
