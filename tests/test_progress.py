"""The progress bar names the case that is running (not the last one that finished): executors report each
case's start, from whatever thread runs it."""
from __future__ import annotations

import io

from rich.console import Console

import bakeoff.harness.run.executors.local as local
import bakeoff.harness.run.orchestrator as runner
from bakeoff.harness.run.executors.local import LocalExecutor
from bakeoff.harness.run.orchestrator import Filters, plan_run, run_cases
from bakeoff.harness.run.slots import Slot
from bakeoff.results.store import Store

CONFIG = """
name: progress
device: cpu
preset: smoke
dtypes: [float32]
workloads: [softmax]
backends: {eager: {}, again: {backend: eager}}
"""


class FakeExecutor:
    """Starts every case, then ends them in order."""

    def run(self, cases, work_dir, on_start=None):
        for case in cases:
            on_start(case)
        for case in cases:
            yield case, {"status": "ok"}

    def stop(self):
        pass

    def drain(self):
        return []

    def close(self):
        pass


def test_description_names_the_running_cases(tmp_path, monkeypatch):
    log: list[str] = []

    class Recording(runner.Progress):
        def update(self, task_id, **kw):
            if "description" in kw:
                log.append(kw["description"])
            super().update(task_id, **kw)

    monkeypatch.setattr(runner, "Progress", Recording)
    cases = plan_run(CONFIG, "c.yaml", Filters()).cases
    a, b = (c.case_id for c in cases)
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run_id = store.create_run(config_name="p", config_path="c.yaml", config_text=CONFIG, device="cpu",
                              environment={}, n_cases=2)
    run_cases(store, run_id, cases, tmp_path / "work", Console(file=io.StringIO()), {},
              FakeExecutor(), on_record=lambda r: log.append(f"recorded {r.case_id}"))
    assert log == [f"running {a}", f"running {a} (+1 more)", f"recorded {a}", f"running {b}", f"recorded {b}",
                   "waiting"]


def test_local_executor_reports_each_start_before_its_worker(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []

    def fake_execute(case, work_dir, slot, workers):
        events.append(("execute", case.case_id))
        return {"status": "ok"}

    monkeypatch.setattr(local, "execute_case", fake_execute)
    cases = plan_run(CONFIG, "c.yaml", Filters()).cases
    executor = LocalExecutor([Slot("cpu#0")])
    done = [c.case_id for c, _ in executor.run(cases, tmp_path, on_start=lambda c: events.append(("start", c.case_id)))]
    executor.close()
    assert done == [c.case_id for c in cases]
    assert events == [(kind, c.case_id) for c in cases for kind in ("start", "execute")]
