"""A store written by an older bakeoff (schema v1) is upgraded in place on open, once, keeping its rows."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from bakeoff.results.schema import SCHEMA_VERSION, records
from bakeoff.results.store import Store, StoreError

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parent.parent


def make_v1_store(url: str) -> None:
    """Create the v1 tables from the golden DDL and write one run with one record, as bakeoff 0.1 did."""
    engine = create_engine(url)
    dialect = engine.dialect.name
    lines = (DATA / f"schema_v1_{dialect}.sql").read_text().splitlines()
    ddl = "\n".join(line for line in lines if not line.startswith("--"))
    with engine.begin() as conn:
        for statement in filter(str.strip, ddl.split(";")):
            conn.exec_driver_sql(statement)
        conn.execute(text("INSERT INTO schema_info (key, value) VALUES ('schema_version', '1')"))
        conn.execute(text("INSERT INTO runs (run_id, started_at, status, config_name, device, environment, "
                          "schema_version, n_cases) VALUES ('old-run', CURRENT_TIMESTAMP, 'complete', 'old', "
                          "'cpu', :env, 1, 1)"), {"env": json.dumps({"fingerprint": "f"})})
        conn.execute(text("INSERT INTO records (run_id, case_id, backend, status, latency_ms_median, details, "
                          "created_at) VALUES ('old-run', 'softmax/M=4/float32/eager', 'eager', 'ok', 1.5, :d, "
                          "CURRENT_TIMESTAMP)"), {"d": json.dumps({"checked_seeds": [0, 1]})})
    engine.dispose()


def test_v1_store_is_upgraded_and_keeps_its_rows(store_url):
    make_v1_store(store_url)
    store = Store(store_url)
    assert store.upgraded_to == list(range(2, SCHEMA_VERSION + 1))
    with store.engine.connect() as conn:  # the current columns, those renamed since v1 under their new names
        assert {c["name"] for c in inspect(conn).get_columns("records")} == {c.name for c in records.columns}
    (old,) = store.records("old-run")
    assert old["latency_ms_median"] == 1.5 and old["details"] == {"checked_seeds": [0, 1]}
    assert old["worker"] is None and old["attempt"] is None  # not recorded by v1
    assert store.run("old-run")["resumes"] == 0
    # the new columns work, and a backend label longer than v1's VARCHAR(64) fits
    label = "inductor-" + "x" * 200
    assert store.add_record("old-run", {"case_id": f"softmax/M=4/float32/{label}", "backend": label,
                                        "status": "ok", "worker": "cpu#1", "attempt": 2})
    assert [r["worker"] for r in store.records("old-run")] == [None, "cpu#1"]
    assert store.start_resume("old-run") == 2
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT value FROM schema_info WHERE key = 'schema_version'")).scalar() == str(
            SCHEMA_VERSION)
    assert Store(store_url).upgraded_to == []  # a second open finds it current


def test_concurrent_opens_upgrade_once(store_url):
    make_v1_store(store_url)
    code = ("import sys; from bakeoff.results.store import Store; s = Store(sys.argv[1]); "
            "print(','.join(map(str, s.upgraded_to)) or '-')")
    procs = [subprocess.Popen([sys.executable, "-c", code, store_url], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    upgrade = ",".join(map(str, range(2, SCHEMA_VERSION + 1)))
    assert sorted(o.strip() for o, _ in outs) == ["-", "-", upgrade]  # exactly one process ran the steps
    assert len(Store(store_url).records("old-run")) == 1


def test_newer_or_foreign_store_is_refused(tmp_path):
    newer = f"sqlite:///{tmp_path / 'newer.db'}"
    Store(newer)
    engine = create_engine(newer)
    with engine.begin() as conn:
        conn.execute(text("UPDATE schema_info SET value = :v"), {"v": str(SCHEMA_VERSION + 1)})
    with pytest.raises(StoreError, match="newer than this bakeoff"):
        Store(newer)
    foreign = f"sqlite:///{tmp_path / 'foreign.db'}"
    with create_engine(foreign).begin() as conn:
        conn.execute(text("CREATE TABLE runs (x INTEGER)"))
    with pytest.raises(StoreError, match="not a bakeoff store"):
        Store(foreign)


def test_a_field_newly_marked_in_table_is_added_as_its_typed_column(store_url):
    """migrations.add_record_columns, the one line a migration step needs for a new record column: the
    column gets the model's type, old rows read it as NULL, new records fill it."""
    from bakeoff.results.migrations import add_record_columns

    store = Store(store_url)
    run_id = store.create_run(config_name="c", config_path=None, config_text="", device="cpu", environment={},
                              n_cases=2)
    store.add_record(run_id, {"case_id": "a", "status": "ok"})
    with store.engine.begin() as conn:  # a store from before pct_of_ceiling and cache_hit_warm were columns
        conn.exec_driver_sql("ALTER TABLE records DROP COLUMN pct_of_ceiling")
        conn.exec_driver_sql("ALTER TABLE records DROP COLUMN cache_hit_warm")
    with store.engine.begin() as conn:
        add_record_columns(conn, "pct_of_ceiling", "cache_hit_warm")
    with store.engine.connect() as conn:
        types = {c["name"]: str(c["type"]).upper() for c in inspect(conn).get_columns("records")}
    assert types["pct_of_ceiling"] in ("FLOAT", "DOUBLE PRECISION", "REAL")
    assert types["cache_hit_warm"] == "BOOLEAN"
    store = Store(store_url)
    assert store.add_record(run_id, {"case_id": "b", "status": "ok", "pct_of_ceiling": 42.5, "cache_hit_warm": True})
    old, new = store.case_records(run_id)
    assert old.pct_of_ceiling is None and new.pct_of_ceiling == 42.5 and new.cache_hit_warm is True
