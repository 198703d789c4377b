"""Progress: on a terminal the bar names the case that is running (not the last one that finished; executors
report each case's start, from whatever thread runs it) and ends on `done`; off a terminal each finished case
is one plain line."""
from __future__ import annotations

import io
import re
import signal

import pytest
from rich.console import Console

import bakeoff.harness.run.executors.local as local
import bakeoff.harness.run.progress as progress
from bakeoff.harness.run.executors.local import LocalExecutor
from bakeoff.harness.run.orchestrator import Filters, plan_run, run_cases
from bakeoff.harness.supervise.slots import Slot
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

    def resume_options(self):
        return ""


class TimedExecutor(FakeExecutor):
    """Ends each case with a measured latency and speedup."""

    def run(self, cases, work_dir, on_start=None):
        for case in cases:
            on_start(case)
            yield case, {"status": "ok", "latency_ms_median": 0.0123, "speedup_vs_eager": 2.5}


def _run(tmp_path, console, executor, on_record=None):
    cases = plan_run(CONFIG, "c.yaml", Filters()).cases
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run_id = store.create_run(config_name="p", config_path="c.yaml", config_text=CONFIG, device="cpu",
                              environment={}, n_cases=2)
    run_cases(store, run_id, cases, tmp_path / "work", console, {}, executor, on_record=on_record)
    return cases


class InterruptedExecutor(FakeExecutor):
    """Ends the first case, then is stopped as by Ctrl-C."""

    def run(self, cases, work_dir, on_start=None):
        on_start(cases[0])
        yield cases[0], {"status": "ok"}
        raise KeyboardInterrupt


def _descriptions(monkeypatch) -> list[str]:
    """The bar's descriptions, in the order they are set."""
    log: list[str] = []

    class Recording(progress.Progress):
        def update(self, task_id, **kw):
            if "description" in kw:
                log.append(kw["description"])
            super().update(task_id, **kw)

    monkeypatch.setattr(progress, "Progress", Recording)
    return log


def test_description_names_the_running_cases_and_ends_on_done(tmp_path, monkeypatch):
    log = _descriptions(monkeypatch)
    out = io.StringIO()
    cases = _run(tmp_path, Console(file=out, force_terminal=True, width=100), FakeExecutor(),
                 on_record=lambda r: log.append(f"recorded {r.case_id}"))
    a, b = (c.case_id for c in cases)
    assert log[:5] == [f"running {a}", f"running {a} (+1 more)", f"recorded {a}", f"running {b}", f"recorded {b}"]
    assert set(log[5:]) == {"done"} and log[5:]
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())  # the frames, without terminal codes
    assert [x for x in shown.splitlines() if x.strip()][-1].startswith("done") and "waiting" not in shown


def test_an_interrupted_run_ends_its_bar_on_interrupted(tmp_path, monkeypatch):
    log = _descriptions(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, Console(file=io.StringIO(), force_terminal=True, width=100), InterruptedExecutor())
    assert log[-1] == "interrupted", log


def test_off_a_terminal_each_finished_case_is_one_plain_line(tmp_path):
    """A CI log or a file gets a line per case as it ends (a live bar would print nothing until the end)."""
    out = io.StringIO()
    cases = _run(tmp_path, Console(file=out, width=100), TimedExecutor())
    lines = out.getvalue().splitlines()
    assert len(lines) == len(cases) == 2, lines
    for i, (line, case) in enumerate(zip(lines, cases), 1):
        assert line.startswith(f"[{i}/2] ok ") and "softmax [" in line and case.label in line, line
        assert "0.0123 ms" in line and re.search(r"elapsed 0:00:0\d  ETA 0:00:0\d$", line), line
        assert "×" not in line  # both labels run eager: the baseline has no speedup to show (not '1×')
    assert lines[-1].endswith("ETA 0:00:00")
    assert "━" not in out.getvalue() and "\x1b[" not in out.getvalue()  # no bar, no escape codes
    assert progress.clock(3725.4) == "1:02:05"
    compiled = {"workload": "softmax", "shape": "M=37,N=300", "dtype": "float32", "backend": "inductor-max",
                "adapter": "inductor", "status": "ok", "headline_ms": 0.0123, "speedup_vs_eager": 2.5}
    assert progress.case_line(compiled) == "softmax [M=37,N=300, float32] inductor-max  0.0123 ms  2.5×"


def test_local_executor_reports_each_start_before_its_worker(tmp_path, monkeypatch):
    events: list[tuple[str, str]] = []

    def fake_execute(case, work_dir, slot, workers, **_):
        events.append(("execute", case.case_id))
        return {"status": "ok"}

    monkeypatch.setattr(local, "execute_case", fake_execute)
    cases = plan_run(CONFIG, "c.yaml", Filters()).cases
    executor = LocalExecutor([Slot("cpu#0")])
    done = [c.case_id for c, _ in executor.run(cases, tmp_path, on_start=lambda c: events.append(("start", c.case_id)))]
    executor.close()
    assert done == [c.case_id for c in cases]
    assert events == [(kind, c.case_id) for c in cases for kind in ("start", "execute")]


def test_a_ctrl_c_during_a_records_write_waits_for_the_write_then_interrupts_the_run(tmp_path, monkeypatch):
    """Ctrl-C landing while a case's record is written (inside its serialization once gave a
    PydanticSerializationError and a traceback): the record is stored and its line printed whole, then the run
    stops as interrupted, with the usual KeyboardInterrupt."""
    finished = progress.RunProgress.finished

    def finished_under_ctrl_c(self, case, flat):
        # raise() sends it to this (main) thread, whose handler runs at once; os.kill(getpid()) may be taken by
        # any thread of the process (torch's, JAX's), and then the main thread sees it only later (a fresh-clone
        # CI run saw no KeyboardInterrupt at all)
        signal.raise_signal(signal.SIGINT)
        finished(self, case, flat)

    monkeypatch.setattr(progress.RunProgress, "finished", finished_under_ctrl_c)
    out = io.StringIO()
    cases = plan_run(CONFIG, "c.yaml", Filters()).cases
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run_id = store.create_run(config_name="p", config_path="c.yaml", config_text=CONFIG, device="cpu",
                              environment={}, n_cases=2)
    # Python's own handler, whatever an earlier test or library left installed in this process
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_cases(store, run_id, cases, tmp_path / "work", Console(file=out, width=100), {}, FakeExecutor())
    finally:
        signal.signal(signal.SIGINT, previous)
    assert store.done_case_ids(run_id) == {cases[0].case_id}
    assert store.run(run_id)["status"] == "interrupted"
    assert out.getvalue().splitlines()[0].startswith("[1/2] ok") and "interrupted" in out.getvalue()


def test_sigterm_interrupts_the_cases_of_a_caller_that_is_not_the_cli(tmp_path, monkeypatch):
    """run_cases makes SIGTERM stop the run as Ctrl-C does for whoever calls it, not only under `bakeoff run`
    (which enters sigterm_interrupts before planning), and puts the caller's handler back."""
    finished = progress.RunProgress.finished

    def finished_under_sigterm(self, case, flat):
        signal.raise_signal(signal.SIGTERM)  # held while the record is written, then delivered
        finished(self, case, flat)

    def callers_handler(_signum, _frame):
        raise AssertionError("SIGTERM reached the caller's handler: run_cases did not interrupt the run")

    monkeypatch.setattr(progress.RunProgress, "finished", finished_under_sigterm)
    cases = plan_run(CONFIG, "c.yaml", Filters()).cases
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    run_id = store.create_run(config_name="p", config_path="c.yaml", config_text=CONFIG, device="cpu",
                              environment={}, n_cases=2)
    previous = signal.signal(signal.SIGTERM, callers_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_cases(store, run_id, cases, tmp_path / "work", Console(file=io.StringIO(), width=100), {},
                      FakeExecutor())
        assert signal.getsignal(signal.SIGTERM) is callers_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert store.run(run_id)["status"] == "interrupted" and store.done_case_ids(run_id) == {cases[0].case_id}
