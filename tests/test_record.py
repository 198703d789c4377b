"""The record is one typed model (bakeoff/results/record.py): the store's columns and the export's columns
come from it, a worker's result that does not fit it is a crash record naming the field (never a string),
and a record an older or newer bakeoff stored still reads."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from pydantic import ValidationError

from conftest import bakeoff
from bakeoff.harness.measure.numerics import error_stats
from bakeoff.harness.run.worker.main import serialize
from bakeoff.results.record import GROUPS, CaseRecord, ColdOutput, StoredRecord, WarmOutput
from bakeoff.results.schema import RECORD_COLUMNS, records as records_table
from bakeoff.results.store import Store

DATA = Path(__file__).parent / "data"


def test_every_field_is_documented_and_in_one_group():
    seen: dict[str, str] = {}
    for group in GROUPS:
        for name, info in group.model_fields.items():
            assert name not in seen, f"{name} is in {seen[name]} and {group.__name__}"
            seen[name] = group.__name__
            assert info.description, f"{group.__name__}.{name} has no description"
    assert set(seen) == set(CaseRecord.model_fields) - {"legacy_fields"}


def test_record_columns_match_the_golden_list():
    # A column added or retyped needs a schema migration (results/migrations.py): update the golden file then.
    got = [f"{c.name} {c.type.compile()}" for c in records_table.columns]
    assert got == (DATA / "records_columns.txt").read_text().split("\n")[:-1]
    assert RECORD_COLUMNS[-1] == "details"


def test_error_stats_fields_are_record_fields():
    stats = error_stats(torch.ones(4), torch.ones(4, dtype=torch.float64))
    for suffix, prefix in (("vs_fp64", "err"), ("vs_eager", "err"), ("vs_fp64", "eager_err")):
        ColdOutput.model_validate(stats.as_dict(suffix, prefix))  # an ErrorStats field the model lacks fails


def test_worker_serializes_through_the_model():
    ok = json.loads(serialize({"status": "ok", "compile_s": 1.5, "err_max_abs_vs_fp64": math.inf,
                               "timing_windows": [[1.0, 2.0]]}, ColdOutput))
    assert ok == {"status": "ok", "compile_s": 1.5, "err_max_abs_vs_fp64": math.inf, "timing_windows": [[1.0, 2.0]]}
    unknown = json.loads(serialize({"status": "ok", "made_up_field_s": 1.0}, ColdOutput))
    assert unknown["status"] == "crash" and "made_up_field_s: not a record field" in unknown["reason"]
    odd = json.loads(serialize({"compile_warm_s": 1.0, "compile_stages_warm_s": {"build": object()}}, WarmOutput))
    assert odd["status"] == "crash" and "compile_stages_warm_s.build" in odd["reason"]
    assert "object" in odd["reason"]


def test_store_refuses_unknown_fields_and_reads_foreign_ones(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run_id = store.create_run(config_name="c", config_path=None, config_text="", device="cpu", environment={},
                              n_cases=2)
    with pytest.raises(ValidationError, match="made_up_field_s"):
        store.add_record(run_id, {"case_id": "a", "status": "ok", "made_up_field_s": 1.0})
    with pytest.raises(ValidationError, match="status"):
        store.add_record(run_id, {"case_id": "a"})  # every record has an outcome
    assert store.add_record(run_id, CaseRecord(case_id="a", status="ok", latency_ms_median=2.0,
                                               compile_notes=["n"], ceiling={"name": "copy_gbps", "value": 10.0}))
    (row,) = store.records(run_id)
    assert row["latency_ms_median"] == 2.0 and row["details"] == {
        "compile_notes": ["n"], "ceiling": {"name": "copy_gbps", "value": 10.0}}  # only what was measured
    # A row written by another bakeoff: a field this one does not know, and one of another type.
    foreign = {**row, "id": 7, "case_id": "b", "kernel_count": None, "status": "a_newer_status",
               "details": {"future_metric_ms": 3.5, "compile_notes": "one note, not a list"}}
    rec = StoredRecord.from_row(foreign)
    assert rec.case_id == "b" and rec.latency_ms_median == 2.0 and rec.compile_notes is None
    assert rec.status == "a_newer_status"  # read as written
    assert rec.legacy_fields == {"future_metric_ms": 3.5, "compile_notes": "one note, not a list"}
    flat = rec.flat()
    assert flat["future_metric_ms"] == 3.5 and list(flat)[:4] == ["run_id", "id", "created_at", "case_id"]


CONFIG = """
name: record
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends:
  eager: {}
  bad_info: {backend: faulty, mode: bad_info}
  extra: {backend: faulty}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
timeout_s: 300
"""

# Loaded by every Python process of the run (PYTHONPATH): the workers of the case labelled `extra` return one
# field more than the record model has, as a worker of a newer bakeoff, or a harness change that forgot the
# model, would.
SITECUSTOMIZE = """
import bakeoff.harness.run.worker.cold as cold

_run_cold = cold.run_cold

def run_cold(case, artifacts_dir):
    out = _run_cold(case, artifacts_dir)
    return {**out, "made_up_field_s": 1.0} if case.label == "extra" else out

cold.run_cold = run_cold
"""


def test_results_that_do_not_fit_the_model_are_crash_records(tmp_path, monkeypatch):
    (tmp_path / "c.yaml").write_text(CONFIG)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path / 'site'}:{Path(__file__).resolve().parent.parent}")
    db = f"sqlite:///{tmp_path / 'r.db'}"
    bakeoff("run", "c.yaml", "--db", db, cwd=tmp_path, check=True)
    got = {r["backend"]: r for r in json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path,
                                                       check=True).stdout)}
    assert got["eager"]["status"] == "ok" and got["eager"]["latency_ms_median"] > 0
    bad, extra = got["bad_info"], got["extra"]
    assert bad["status"] == "crash", bad
    assert "compile_notes.1: Input should be a valid string (got RuntimeError)" in bad["reason"]
    assert extra["status"] == "crash", extra
    assert "made_up_field_s: not a record field (declare it in bakeoff/results/record.py)" in extra["reason"]
    assert all(r["latency_ms_median"] is None for r in (bad, extra))  # nothing of an unfit result is kept
    assert extra["worker"] == "cpu#0" and extra["case_id"].endswith("/extra")  # but the case and process are

    # Every export has the model's columns, in its order, whatever each record measured.
    columns = StoredRecord.export_columns()
    assert all(list(r) == columns for r in got.values())
    out = tmp_path / "r.csv"
    bakeoff("export", "latest", "--format", "csv", "-o", str(out), "--db", db, cwd=tmp_path, check=True)
    frame = pd.read_csv(out)
    assert list(frame.columns) == columns and len(frame) == 3
