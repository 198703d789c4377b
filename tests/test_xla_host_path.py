"""What the host figures time for XLA: the executable's own call and JAX's own wait, nothing of the harness's.

The single-call and pipelined figures must mean what JAX's own loop measures (`f(*args)`, then
`block_until_ready`): no conversion to torch, no re-wrapped arguments and no device-wide synchronize inside
the timed region, and a pipelined batch long enough that one call's exposed dispatch does not weigh on it.
"""
from types import SimpleNamespace

import pytest
import torch

from backend_check import smoke_graph
from bakeoff.backends import get_backend
from bakeoff.harness.measure import timing
from bakeoff.harness.worker.input_tensors import make_inputs
from bakeoff.harness.worker.stages import timing_targets

REASON = get_backend("xla").available()


def _xla(workload: str = "ew_sigmoid_relu"):
    backend = get_backend("xla")
    graph = smoke_graph(workload, "float32")
    compiled = backend.compile(graph, [], "cpu", backend.Options())
    inputs = make_inputs(graph, 0, "cpu")
    return backend, compiled, inputs, compiled.prepare(inputs)


class _Spy:
    """Stands in for the executable: records each call's arguments, then calls it."""

    def __init__(self, executable):
        self.executable, self.calls = executable, []

    def __call__(self, *args):
        self.calls.append(args)
        return self.executable(*args)


@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_timed_call_is_the_executable_on_the_prepared_arrays(monkeypatch):
    backend, compiled, _, prepared = _xla()
    spy = _Spy(compiled.executable)
    compiled.executable = spy
    monkeypatch.setattr(type(compiled), "to_torch", lambda self, raw: pytest.fail("to_torch inside the timed call"))
    target = timing_targets(SimpleNamespace(backend="xla"), backend, compiled, prepared, compiled, prepared)[0]
    out = target.call()
    target.sync()
    assert len(spy.calls) == 1
    # The very arrays prepare() made, not re-wrapped or copied per call.
    assert all(a is b for a, b in zip(spy.calls[0], prepared, strict=True))
    import jax

    assert all(isinstance(x, jax.Array) and x.is_ready() for x in jax.tree.leaves(out))


@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_sync_waits_with_block_until_ready_on_the_last_outputs(monkeypatch):
    _, compiled, _, prepared = _xla()
    import jax

    waited = []
    monkeypatch.setattr(jax, "block_until_ready", lambda x: waited.append(x) or x)
    out = compiled.run(prepared)
    compiled.sync()
    assert waited == [out]


@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_prepare_gives_xla_buffers_of_its_own():
    _, _, inputs, prepared = _xla()
    for t, x in zip(inputs, prepared, strict=True):
        assert x.unsafe_buffer_pointer() != t.data_ptr()  # a copy, not a DLPack alias of torch's memory
        assert torch.equal(torch.from_dlpack(x), t)


def _logged(monkeypatch):
    """A CUDA device whose synchronize, the host clock, the call and the sync only write to a log."""
    log: list[str] = []
    monkeypatch.setattr(timing.torch.cuda, "synchronize", lambda *a: log.append("device-sync"))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: log.append("clock") or float(len(log)))
    return log, (lambda: log.append("call")), (lambda: log.append("sync"))


def _timed_regions(log: list[str]) -> list[list[str]]:
    clocks = [i for i, e in enumerate(log) if e == "clock"]
    return [log[a + 1:b] for a, b in zip(clocks[::2], clocks[1::2])]


def test_single_call_times_the_call_and_its_own_sync_only(monkeypatch):
    log, call, sync = _logged(monkeypatch)
    timing.host_latency(call, sync, "cuda", reps=3)
    assert _timed_regions(log) == [["call", "sync"]] * 3
    assert log[0] == "device-sync" and log[-1] == "device-sync"  # idle before each sample, and after the last


def test_pipelined_batch_times_the_calls_and_one_sync_only(monkeypatch):
    log, call, sync = _logged(monkeypatch)
    timing.pipelined_latency(call, sync, "cuda", calls=4, reps=2)
    assert _timed_regions(log) == [["call"] * 4 + ["sync"]] * 2
    assert log[0] == "device-sync" and log[-1] == "device-sync"


def test_pipelined_batch_is_capped_by_the_gpus_free_memory(monkeypatch):
    monkeypatch.setattr(timing.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(timing.torch.cuda, "mem_get_info", lambda device=None: (128 * 2**30, 141 * 2**30))
    cap = timing.pipeline_memory_cap_bytes("cuda:0")
    assert cap == 32 * 2**30
    # 8192x8192 bf16 elementwise (two inputs, one output: 384 MiB moved) at 0.29 ms a call: about 20 ms of
    # calls, as JAX's own loop takes, no longer 10.
    assert timing.pipeline_calls(0.29, 3 * 8192 * 8192 * 2, cap) == 68
    monkeypatch.setattr(timing.torch.cuda, "mem_get_info", lambda device=None: (2 * 2**30, 141 * 2**30))
    assert timing.pipeline_memory_cap_bytes("cuda") == timing.PIPELINE_MEMORY_BYTES  # never under 4 GiB
    assert timing.pipeline_memory_cap_bytes("cpu") == timing.PIPELINE_MEMORY_BYTES
