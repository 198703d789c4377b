"""Names from configs reach SQL only as bound parameters: labels that are SQL are stored and read back
intact, through the real CLI, on SQLite and on PostgreSQL."""
from __future__ import annotations

import json

from sqlalchemy import create_engine, text

from conftest import bakeoff
from bakeoff.results.store import Store

NAME = "x'; DROP TABLE runs; --"
EAGER = "eager'; DROP TABLE records; --"
FAILING = 'robert"); DELETE FROM runs WHERE ("1"="1'
CONFIG = f"""
name: "{NAME}"
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends:
  "{EAGER}": {{backend: eager}}
  '{FAILING}': {{backend: faulty, mode: compile_error}}
seeds: [0, 1]
timing: {{warmup_s: 0.01, budget_s: 0.05, min_reps: 3}}
compile: {{warm: false}}
timeout_s: 300
"""


def test_sql_in_labels_is_stored_as_text(tmp_path, store_url):
    (tmp_path / "c.yaml").write_text(CONFIG)
    bakeoff("run", "c.yaml", "--jobs", "2", "--db", store_url, cwd=tmp_path, check=True)
    records = json.loads(bakeoff("export", "latest", "--db", store_url, cwd=tmp_path, check=True).stdout)
    assert {r["backend"]: r["status"] for r in records} == {EAGER: "ok", FAILING: "compile_error"}
    assert {r["case_id"] for r in records} == {f"ew_sigmoid_relu/M=61,N=257/float32/{label}" for label in (EAGER, FAILING)}
    store = Store(store_url)
    assert store.run(store.latest_run_id())["config_name"] == NAME
    with create_engine(store_url).connect() as conn:  # both tables are still there, with exactly these rows
        assert conn.execute(text("select count(*) from runs")).scalar() == 1
        assert conn.execute(text("select count(*) from records")).scalar() == 2
