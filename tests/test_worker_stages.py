"""The worker's stages without a worker process: a case crosses the process boundary as JSON with its typed
settings; a failure's status follows one rule (a lazy compiler's failure in the first run is a compile error,
an out-of-memory error is `oom` wherever it happens); a composition ends at the first failing stage."""
from __future__ import annotations

import pytest

from bakeoff.harness.config.timing import TimingConfig
from bakeoff.harness.plan.cases import Case, CaseSweep
from bakeoff.harness.worker.compile_step import first_result
from bakeoff.harness.worker.errors import FirstRunError, error_record
from bakeoff.harness.worker.stages import StageFailed, failing_as


def _case(**fields) -> Case:
    base = dict(case_id="w/N=4/float32/eager", workload="w", preset="smoke", shape="N=4", dims={"N": 4},
                dtype="float32", label="eager", device="cpu", graph={}, options={}, seeds=(0, 1),
                timing={"budget_s": 0.5, "gate": "exclusive"}, timeout_s=60, warm_compile=False, flops=0,
                bytes_moved=0)
    return Case(**{**base, **fields})


def test_a_case_round_trips_through_json_with_its_typed_settings():
    sweep = CaseSweep("S", (128, 256), {"nodes": [], "outputs": []})
    case = _case(sweep=sweep)
    assert isinstance(case.timing, TimingConfig) and case.timing.budget_s == 0.5
    assert case.timing.cuda_graph and case.timing.min_reps == TimingConfig().min_reps  # the model's defaults
    back = Case.from_json(case.to_json())
    assert back == case and back.timing == case.timing and back.sweep == sweep
    assert isinstance(back.seeds, tuple) and isinstance(back.sweep.values, tuple)
    with pytest.raises(ValueError):
        _case(timing={"budget_s": -1})  # checked when the case is made, not when it is timed


class _LazyCompilerError(Exception):
    """Stands for an error torch.compile raises inside the first run."""


_LazyCompilerError.__module__ = "torch._inductor.exc"


class _Compiled:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    def prepare(self, inputs):
        return inputs

    def run(self, prepared):
        if self.error is not None:
            raise self.error
        return prepared

    def sync(self) -> None:
        pass


def _status(make) -> dict:
    try:
        with failing_as("compile_error"):
            first_result(make, [])
    except StageFailed as failed:
        return failed.fields
    return {"status": "ok"}


def test_a_failure_gets_its_status_by_one_rule():
    def compile_fails():
        raise ValueError("no kernel for this op")

    assert _status(compile_fails)["status"] == "compile_error"
    assert _status(lambda: _Compiled(RuntimeError("illegal memory access")))["status"] == "runtime_error"
    lazy = _status(lambda: _Compiled(_LazyCompilerError("lowering failed")))
    assert lazy["status"] == "compile_error" and lazy["reason"] == "_LazyCompilerError: lowering failed"
    assert _status(lambda: _Compiled(RuntimeError("CUDA out of memory")))["status"] == "oom"
    assert _status(lambda: _Compiled())["status"] == "ok"
    try:
        raise FirstRunError("x") from MemoryError()
    except FirstRunError as exc:
        assert error_record("runtime_error", exc)["status"] == "oom"


def test_the_compile_figures_leave_out_the_workers_waits_for_the_gate(monkeypatch):
    """A compile that rejoins the device's gate for its timing (tritongen's search) may wait there while other
    cases time: that wait is the harness's, kept as gate_wait_s and left out of the compile's seconds."""
    from types import SimpleNamespace

    from bakeoff.harness.worker import compile_step

    clock, waited = [0.0], [0.0]
    monkeypatch.setattr(compile_step, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(compile_step, "waited_so_far_s", lambda: waited[0])

    class Run(_Compiled):
        def run(self, prepared):
            clock[0] += 1.0  # the first run: 1 s, no wait
            return prepared

    def make():
        clock[0] += 5.0  # 5 s of compile, 3 of them waiting for the gate
        waited[0] += 3.0
        return Run()

    r = first_result(make, [])
    assert (r.total_s, r.first_run_s, r.gate_wait_s) == (3.0, 1.0, 3.0)


def test_a_compiler_done_before_its_first_run_runs_it_inside_the_gate(monkeypatch):
    """A compiler that finished inside compile() (it names its compiler stages: IREE, ONNX Runtime, TensorRT)
    leaves a first run that is device work alone, as long as one call (IREE's float32 mlp_block: 1.1 s), so that
    run rejoins the device's gate (device_work); a lazy compiler's first run is its compile and stays outside."""
    from contextlib import contextmanager

    from bakeoff.backends.compiled import CompileInfo
    from bakeoff.harness.worker import compile_step

    inside, seen = [False], []

    @contextmanager
    def device_work():
        inside[0] = True
        try:
            yield True
        finally:
            inside[0] = False

    monkeypatch.setattr(compile_step, "device_work", device_work)

    class Run(_Compiled):
        def __init__(self, stages):
            super().__init__()
            self.info = CompileInfo(compiler_stages=stages)

        def prepare(self, inputs):
            seen.append(("prepare", inside[0]))
            return inputs

        def run(self, prepared):
            seen.append(("run", inside[0]))
            return prepared

        def sync(self) -> None:
            seen.append(("sync", inside[0]))

    first_result(lambda: Run(("compile",)), [])
    assert seen == [("prepare", True), ("run", True), ("sync", True)]
    seen.clear()
    first_result(lambda: Run(()), [])  # Inductor, XLA, tritongen, eager: the first call compiles
    assert seen == [("prepare", False), ("run", False), ("sync", False)]
    seen.clear()
    first_result(lambda: _Compiled(), [])  # no CompileInfo at all: as a lazy compiler
    assert not inside[0]


def test_the_figures_are_made_after_the_timing_gate_and_the_load_watch_are_left(monkeypatch):
    """The device's part of the timing runs in the gate alone; parsing the profiler's events and evaluating the
    PM sampler's samples (host work) waits until the gate is released, so other workers' cases time meanwhile."""
    from contextlib import contextmanager

    from bakeoff.harness.worker import stages

    state = {"gate": False, "watch": False}

    @contextmanager
    def gate():
        state["gate"] = True
        yield None
        state["gate"] = False

    class Watch:
        def __init__(self, device):
            pass

        def __enter__(self):
            state["watch"] = True
            return self

        def __exit__(self, *exc):
            state["watch"] = False

        def fields(self):
            return {}

    def collect(*args):
        assert state == {"gate": True, "watch": True}  # the timed calls run in the gate
        return lambda: {"figures made in the gate": state["gate"] or state["watch"]}

    monkeypatch.setattr(stages, "timing_exclusive", gate)
    monkeypatch.setattr(stages, "LoadWatch", Watch)
    monkeypatch.setattr(stages, "collect_all", collect)
    monkeypatch.setattr(stages, "assess_noise", lambda out, *a, **k: {})

    class Backend:
        timed_with_events = False

    class Result:
        compiled = prepared = None

    class Phases:
        def take_gate_wait(self):
            pass

    out = stages.time_case(_case(), Backend(), Result(), None, None, Phases())
    assert out == {"figures made in the gate": False}
