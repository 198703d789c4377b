"""Several processes writing one database at once lose nothing and duplicate nothing (SQLite and PostgreSQL).

Three processes start on an empty database (racing to create the schema), each adds its own run with 40
records, then all three insert the same 20 cases into one run: each case must land exactly once.
"""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from bakeoff.results.store import Store

REPO = Path(__file__).resolve().parent.parent
WRITERS, OWN, CONTESTED = 3, 40, 20

WRITER = f"""
import sys, time
from bakeoff.results.store import Store
url, name = sys.argv[1], sys.argv[2]
store = Store(url)
run = store.create_run(config_name=name, config_path=None, config_text="", device="cpu",
                       environment={{"fingerprint": "f"}}, n_cases={OWN})
for i in range({OWN}):
    assert store.add_record(run, {{"case_id": f"case-{{i}}", "status": "ok", "worker": name,
                                  "latency_ms_median": float(i)}})
deadline = time.monotonic() + 120
while len(store.runs()) < {WRITERS}:  # the database is the barrier: wait for every writer's run
    assert time.monotonic() < deadline, "the other writers never created their runs"
    time.sleep(0.05)
target = min(r["run_id"] for r in store.runs())
won = sum(store.add_record(target, {{"case_id": f"contested-{{i}}", "status": "ok", "worker": name}})
          for i in range({CONTESTED}))
print(run, won)
"""


def test_three_writers_lose_and_duplicate_nothing(store_url):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, store_url, f"writer{i}"], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(WRITERS)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    own_runs = {out.split()[0]: int(out.split()[1]) for out, _ in outs}
    assert sum(own_runs.values()) == CONTESTED  # every contested case was won exactly once
    store = Store(store_url)
    target = min(own_runs)
    for run_id in own_runs:
        rows = store.records(run_id)
        ids = Counter(r["case_id"] for r in rows)
        assert max(ids.values()) == 1  # no duplicates
        own = [r for r in rows if r["case_id"].startswith("case-")]
        assert len(own) == OWN and {r["worker"] for r in own} == {store.run(run_id)["config_name"]}
        assert sorted(r["latency_ms_median"] for r in own) == [float(i) for i in range(OWN)]
        contested = {r["case_id"] for r in rows if r["case_id"].startswith("contested-")}
        assert contested == ({f"contested-{i}" for i in range(CONTESTED)} if run_id == target else set())
