"""Pre-started workers and the shared reference, piece by piece: which environments a spare may take, that a
spare imports no compiler while it gets ready, that a kept reference is read only for the same inputs and
eager's kept error only for the same eager bytes."""
from __future__ import annotations

import dataclasses
import os

import psutil
import torch

from bakeoff.harness.measure.checks import check_outputs, reference_outputs
from bakeoff.harness.measure.numerics import error_stats
from bakeoff.harness.supervise.case_process import base_env
from bakeoff.harness.supervise.leftovers import SPARE_TMP_PREFIX, owned_prefix
from bakeoff.harness.supervise.prestart import Spare, refusal
from bakeoff.harness.worker import shared_reference as shared
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.harness.worker.phases import PhaseLog
from bakeoff.workloads.ir import bind
from bakeoff.workloads.lower_torch import lower_torch
from bakeoff.workloads.suite import builtin_workloads

BASE = {"PATH": "/usr/bin", "BAKEOFF_GATE": "/tmp/g/cpu", "BAKEOFF_GATE_POLICY": "exclusive"}


def test_cache_folders_and_compiler_switches_may_be_set_late():
    case = {**BASE, "TORCHINDUCTOR_CACHE_DIR": "/c/i", "TRITON_CACHE_DIR": "/c/t", "JAX_COMPILATION_CACHE_DIR": "/c/j",
            "BAKEOFF_TRITONGEN_CACHE_DIR": "/c/g", "BAKEOFF_TRT_CACHE_DIR": "/c/r", "TRITON_INTERPRET": "1",
            "XLA_FLAGS": "--xla_cpu_enable_fast_math=false", "BAKEOFF_PHASES_FILE": "/p"}
    assert refusal(BASE, case, imported=[]) is None
    # Each process's own temporary folder (the spare's, then its case's: supervise/leftovers.py) measures nothing.
    assert refusal({**BASE, "TMPDIR": "/tmp/bakeoff-spare-x/tmp"}, {**BASE, "TMPDIR": "/tmp/bakeoff-case-y/tmp"},
                   imported=["torch._inductor", "triton"]) is None


def test_a_variable_already_read_gets_the_case_a_fresh_process():
    assert "triton" in refusal(BASE, {**BASE, "TRITON_INTERPRET": "1"}, imported=["triton"])
    assert "torch._inductor" in refusal(BASE, {**BASE, "TORCHINDUCTOR_CACHE_DIR": "/c"}, imported=["torch._inductor"])
    # Variables no table entry vouches for may be read when torch is imported.
    assert "OMP_NUM_THREADS" in refusal(BASE, {**BASE, "OMP_NUM_THREADS": "1"}, imported=[])
    assert "CUDA_VISIBLE_DEVICES" in refusal(BASE, {**BASE, "CUDA_VISIBLE_DEVICES": "1"}, imported=[])
    # The gate the spare joined while getting ready must be the case's; its policy is read when the case
    # arrives (it only changes how the case times).
    assert "BAKEOFF_GATE" in refusal(BASE, {**BASE, "BAKEOFF_GATE": "/tmp/g/gpu-1"}, imported=[])
    assert refusal(BASE, {**BASE, "BAKEOFF_GATE_POLICY": "timers_only"}, imported=[]) is None
    removed = {k: v for k, v in BASE.items() if k != "PATH"}
    assert "PATH" in refusal(BASE, removed, imported=[])


def test_a_spare_gets_ready_without_importing_any_compiler(tmp_path):
    env = {**base_env(None, None, "exclusive"), "BAKEOFF_PARENT_PID": str(os.getpid())}
    spare = Spare.start(env, "cpu", profiler=False)
    try:
        # Its folder names its maker (cleaned up should the orchestrator be killed) and holds its TMPDIR.
        assert spare.folder.name.startswith(owned_prefix(SPARE_TMP_PREFIX))
        report = spare.wait_ready(timeout_s=300)
        # Read once it is running: read right after the spawn, /proc/PID/environ once lacked TMPDIR (a KeyError
        # in a fresh-clone run whose CPUs were busy; likely the child was still inside its exec).
        assert psutil.Process(spare.proc.pid).environ()["TMPDIR"] == str(spare.folder / "tmp")
        assert isinstance(report, dict), report
        assert report["watched_modules_imported"] == []
        assert report["ready_s"]["imports"] > 0
        proc = spare.hand([str(tmp_path / "missing.json"), str(tmp_path / "out.json"), "cold"], env)
        assert proc.wait(timeout=120) != 0  # it ran the case it was given (a case file that does not exist)
        assert not (tmp_path / "out.json").exists()
    finally:
        spare.discard()
    assert not spare.folder.exists()


def test_starting_the_profiler_imports_no_compiler():
    """torch.profiler's class imports Inductor when it starts (`hasattr(torch, "_inductor")`); the spare's
    profiler start must not, or no Inductor or Triton case could take a spare."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from bakeoff.harness.worker.spare import WATCHED_MODULES, start_profiler_once\n"
            "start_profiler_once('cuda:0' if torch.cuda.is_available() else 'cpu')\n"
            "print(sorted(m for m in WATCHED_MODULES if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr


def _graph(name: str = "layernorm_gelu"):
    w = builtin_workloads()[name]
    return bind(w.graph, w.presets["smoke"], "float32")


def test_a_kept_reference_is_read_back_for_the_same_inputs_only(tmp_path, monkeypatch):
    monkeypatch.setenv(shared.ENV_REFERENCE_DIR, str(tmp_path))
    monkeypatch.setattr(shared, "worth_keeping", lambda compute_s, nbytes: True)
    graph, log = _graph(), PhaseLog(None)
    inputs = make_inputs(graph, 0, "cpu")
    eager = lower_torch(graph)
    first = shared.shared_reference(graph, 0, inputs, eager(*inputs), "cpu", log)
    assert first.source == "computed"
    again_inputs = make_inputs(graph, 0, "cpu")
    again = shared.shared_reference(graph, 0, again_inputs, eager(*again_inputs), "cpu", log)
    assert again.source == "shared" and all(torch.equal(a, b) for a, b in zip(first.refs, again.refs))
    assert all(r.dtype == torch.float64 for r in again.refs)
    assert again.eager_vs_refs == first.eager_vs_refs  # eager's bytes were the same: its error is read back
    # Other inputs under the same key (a generator that changed, say) are never judged by this reference.
    other = [x + 1 for x in inputs]
    theirs = shared.shared_reference(graph, 0, other, eager(*other), "cpu", log)
    assert theirs.source == "computed"
    assert all(torch.equal(a, b) for a, b in zip(theirs.refs, reference_outputs(graph, other, "cpu")))
    assert theirs.eager_vs_refs == [error_stats(e, r) for e, r in zip(eager(*other), theirs.refs)]
    assert shared.reference_key(graph, 0, "cpu") != shared.reference_key(graph, 1, "cpu")
    assert shared.reference_key(graph, 0, "cpu") != shared.reference_key(_graph("rmsnorm"), 0, "cpu")
    assert log.totals["reference"] > 0 and "reference_wait" in log.totals


def test_eager_error_is_read_back_only_for_the_same_eager_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv(shared.ENV_REFERENCE_DIR, str(tmp_path))
    monkeypatch.setattr(shared, "worth_keeping", lambda compute_s, nbytes: True)
    graph, log = _graph(), PhaseLog(None)
    inputs = make_inputs(graph, 0, "cpu")
    eager_out = lower_torch(graph)(*inputs)
    shared.shared_reference(graph, 0, inputs, eager_out, "cpu", log)
    nudged = [o + 1e-3 for o in eager_out]  # a nondeterministic eager, say
    got = shared.shared_reference(graph, 0, inputs, nudged, "cpu", log)
    assert got.source == "shared"
    assert got.eager_vs_refs == [error_stats(o, r) for o, r in zip(nudged, got.refs)]


def test_an_output_with_eagers_bits_gets_eagers_error_without_recomputing_it():
    graph = _graph()
    inputs = make_inputs(graph, 0, "cpu")
    eager_out = lower_torch(graph)(*inputs)
    refs = reference_outputs(graph, inputs, "cpu")
    known = [error_stats(e, r) for e, r in zip(eager_out, refs)]
    marked = [dataclasses.replace(k, rmse=k.rmse * 1.5) for k in known]  # tells the passed-in value apart
    same = check_outputs(graph, 0, [o.clone() for o in eager_out], eager_out, refs, marked)
    assert same.vs_ref == marked[0] and same.eager_vs_ref == marked[0]
    other = check_outputs(graph, 0, [o * (1 + 1e-6) for o in eager_out], eager_out, refs, marked)
    assert other.vs_ref != marked[0] and other.eager_vs_ref == marked[0]
    assert check_outputs(graph, 0, list(eager_out), eager_out, refs).eager_vs_ref == known[0]


def test_keeping_a_reference_must_pay_for_itself():
    assert shared.worth_keeping(compute_s=0.5, nbytes=2**20)
    assert not shared.worth_keeping(compute_s=0.005, nbytes=2**30)  # a GPU recomputes 1 GiB faster than a disk


def test_without_a_folder_every_case_computes_its_own(monkeypatch):
    monkeypatch.delenv(shared.ENV_REFERENCE_DIR, raising=False)
    graph = _graph()
    inputs = make_inputs(graph, 1, "cpu")
    got = shared.shared_reference(graph, 1, inputs, lower_torch(graph)(*inputs), "cpu", PhaseLog(None))
    assert got.source == "computed" and got.refs[0].dtype == torch.float64 and got.eager_vs_refs is None


class _FakeSpare:
    """Stands in for a spare process in the pool's bookkeeping (no process is started)."""

    def __init__(self, env, device, profiler, started_at, ready_at):
        self.env, self.device, self.profiler = env, device, profiler
        self.started_at, self.ready_at, self.proc, self.discarded = started_at, ready_at, object(), False

    def wait_ready(self, timeout_s=0):
        return {"watched_modules_imported": []}

    def warmup_window(self, now):
        return self.started_at, self.ready_at

    def discard(self):
        self.discarded = True


def test_the_pool_tops_up_only_during_a_long_compile(monkeypatch):
    import time

    from bakeoff.harness.supervise import prestart
    from bakeoff.harness.worker.phases import PhaseFile

    now = time.time()
    monkeypatch.setattr(prestart.Spare, "start",
                        classmethod(lambda cls, env, device, profiler: _FakeSpare(env, device, profiler, now, now + 3)))
    pool = prestart.Prestarter(depth=2)
    pool.tick(PhaseFile(begins={"compile": [now - 5]}))
    assert pool.spares == []  # nothing planned yet: the slot may need no more workers
    pool.plan(prestart.SpareSpec(dict(BASE), "cpu", False))
    pool.tick(PhaseFile(begins={"compile": [now - 0.1]}))
    assert pool.spares == []  # a short compile so far: getting ready would overlap what follows it
    pool.tick(PhaseFile(begins={"compile": [now - 5]}, count={"compile": 1}))
    assert pool.spares == []  # that compile has ended
    pool.tick(PhaseFile(begins={"compile": [now - 5]}))
    assert len(pool.spares) == 2 and not pool.wants_more()
    first = pool.spares[0]
    spare, why = pool.take(dict(BASE), "cpu", False)
    assert spare is first and why is None and len(pool.spares) == 1
    assert pool.warmup_overlap_s(now + 1, now + 10) == 2 * 2.0  # both got ready during [now, now + 3]
    spare, why = pool.take({**BASE, "OMP_NUM_THREADS": "1"}, "cpu", False)
    assert spare is None and "OMP_NUM_THREADS" in why and len(pool.spares) == 1  # kept for later cases
    spare, why = pool.take(dict(BASE), "cuda:0", False)
    assert spare is None and pool.spares == []  # made for another device: dropped
    pool.close()
    pool.plan(prestart.SpareSpec(dict(BASE), "cpu", False))
    pool.start_one()
    assert pool.spares == []  # a closed pool starts nothing
