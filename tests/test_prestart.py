"""Pre-started workers and the shared reference, piece by piece: which environments a spare may take, that a
spare imports no compiler while it gets ready, and that a kept reference is read only for the same inputs."""
from __future__ import annotations

import os

import torch

from bakeoff.harness.measure.checks import reference_outputs
from bakeoff.harness.run.case_process import base_env
from bakeoff.harness.run.prestart import Spare, refusal
from bakeoff.harness.run.worker import shared_reference as shared
from bakeoff.harness.run.worker.inputs import make_inputs
from bakeoff.harness.run.worker.phases import PhaseLog
from bakeoff.workloads.ir import bind
from bakeoff.workloads.suite import builtin_workloads

BASE = {"PATH": "/usr/bin", "BAKEOFF_GATE": "/tmp/g/cpu", "BAKEOFF_GATE_POLICY": "exclusive"}


def test_cache_folders_and_compiler_switches_may_be_set_late():
    case = {**BASE, "TORCHINDUCTOR_CACHE_DIR": "/c/i", "TRITON_CACHE_DIR": "/c/t", "JAX_COMPILATION_CACHE_DIR": "/c/j",
            "BAKEOFF_TRITONGEN_CACHE_DIR": "/c/g", "BAKEOFF_TRT_CACHE_DIR": "/c/r", "TRITON_INTERPRET": "1",
            "XLA_FLAGS": "--xla_cpu_enable_fast_math=false", "BAKEOFF_PHASES_FILE": "/p"}
    assert refusal(BASE, case, imported=[]) is None


def test_a_variable_already_read_gets_the_case_a_fresh_process():
    assert "triton" in refusal(BASE, {**BASE, "TRITON_INTERPRET": "1"}, imported=["triton"])
    assert "torch._inductor" in refusal(BASE, {**BASE, "TORCHINDUCTOR_CACHE_DIR": "/c"}, imported=["torch._inductor"])
    # Variables no table entry vouches for may be read when torch is imported.
    assert "OMP_NUM_THREADS" in refusal(BASE, {**BASE, "OMP_NUM_THREADS": "1"}, imported=[])
    assert "CUDA_VISIBLE_DEVICES" in refusal(BASE, {**BASE, "CUDA_VISIBLE_DEVICES": "1"}, imported=[])
    # The gate the spare joined while getting ready must be the case's.
    assert "BAKEOFF_GATE_POLICY" in refusal(BASE, {**BASE, "BAKEOFF_GATE_POLICY": "timers_only"}, imported=[])
    removed = {k: v for k, v in BASE.items() if k != "PATH"}
    assert "PATH" in refusal(BASE, removed, imported=[])


def test_a_spare_gets_ready_without_importing_any_compiler(tmp_path):
    env = {**base_env(None, None, "exclusive"), "BAKEOFF_PARENT_PID": str(os.getpid())}
    spare = Spare.start(env, "cpu", profiler=False)
    try:
        report = spare.wait_ready(timeout_s=300)
        assert isinstance(report, dict), report
        assert report["watched_modules_imported"] == []
        assert report["ready_s"]["imports"] > 0
        proc = spare.hand([str(tmp_path / "missing.json"), str(tmp_path / "out.json"), "cold"], env)
        assert proc.wait(timeout=120) != 0  # it ran the case it was given (a case file that does not exist)
        assert not (tmp_path / "out.json").exists()
    finally:
        spare.discard()
    assert not spare.folder.exists()


def _graph(name: str = "layernorm_gelu"):
    w = builtin_workloads()[name]
    return bind(w.graph, w.presets["smoke"], "float32")


def test_a_kept_reference_is_read_back_for_the_same_inputs_only(tmp_path, monkeypatch):
    monkeypatch.setenv(shared.ENV_REFERENCE_DIR, str(tmp_path))
    monkeypatch.setattr(shared, "worth_keeping", lambda compute_s, nbytes: True)
    graph, log = _graph(), PhaseLog(None)
    inputs = make_inputs(graph, 0, "cpu")
    first, source = shared.shared_reference(graph, 0, inputs, "cpu", log)
    assert source == "computed"
    again, source = shared.shared_reference(graph, 0, make_inputs(graph, 0, "cpu"), "cpu", log)
    assert source == "shared" and all(torch.equal(a, b) for a, b in zip(first, again))
    assert all(r.dtype == torch.float64 for r in again)
    # Other inputs under the same key (a generator that changed, say) are never judged by this reference.
    other = [x + 1 for x in inputs]
    refs, source = shared.shared_reference(graph, 0, other, "cpu", log)
    assert source == "computed"
    assert all(torch.equal(a, b) for a, b in zip(refs, reference_outputs(graph, other, "cpu")))
    assert shared.reference_key(graph, 0, "cpu") != shared.reference_key(graph, 1, "cpu")
    assert shared.reference_key(graph, 0, "cpu") != shared.reference_key(_graph("rmsnorm"), 0, "cpu")
    assert log.totals["reference"] > 0 and "reference_wait" in log.totals


def test_keeping_a_reference_must_pay_for_itself():
    assert shared.worth_keeping(compute_s=0.5, nbytes=2**20)
    assert not shared.worth_keeping(compute_s=0.005, nbytes=2**30)  # a GPU recomputes 1 GiB faster than a disk


def test_without_a_folder_every_case_computes_its_own(monkeypatch):
    monkeypatch.delenv(shared.ENV_REFERENCE_DIR, raising=False)
    graph = _graph()
    refs, source = shared.shared_reference(graph, 1, make_inputs(graph, 1, "cpu"), "cpu", PhaseLog(None))
    assert source == "computed" and refs[0].dtype == torch.float64
