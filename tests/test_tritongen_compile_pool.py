"""tritongen's compile pool (bakeoff/backends/tritongen/compile_pool.py) on the CPU: real worker processes compile a
small kernel for sm_90 (Triton needs no GPU for that, as offline.py shows) into Triton's cache, and the parent's
own JIT path, aimed at sm_90 through a stand-in driver, then finds every kernel there instead of compiling it."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from functools import partial
from pathlib import Path

import pytest

from ci_required import importorskip

importorskip("triton", reason="triton is not installed (pip install 'bakeoff[triton]')")

from bakeoff.backends.tritongen import compile_pool, tune  # noqa: E402

KERNEL = textwrap.dedent('''
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
''')


class Sm90Driver:
    """Triton's active driver as the JIT asks it on an H100/H200, with no GPU: target sm_90, device 0."""

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


def _import(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def sm90(tmp_path, monkeypatch):
    """A generated module's `add_kernel` as a real JITFunction (not the interpreter's), Triton's cache in
    tmp_path/triton, the JIT aimed at sm_90, and a two-worker pool stopped afterwards."""
    from triton.runtime.driver import driver

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # triton.jit reads it when it decorates
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "2")
    monkeypatch.setattr(driver, "_active", Sm90Driver())
    path = tmp_path / "gen_add.py"
    path.write_text(KERNEL)
    name = f"bakeoff_test_compile_pool_{os.getpid()}_{tmp_path.name}"
    yield _import(path, name)
    compile_pool.shutdown()
    sys.modules.pop(name, None)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state  # a zombie has exited; reaping it is its new parent's part


def test_workers_fill_the_cache_that_the_parents_jit_path_hits(sm90, monkeypatch):
    """Two candidates compile in worker processes; the parent's warmups that follow are cache hits (its own
    compile pipeline, ASTSource.make_ir, is made to fail here and is never reached); a candidate the compiler
    refuses is an error in words, and is not compiled again in the parent."""
    import torch
    from triton.compiler import compiler

    def no_compile_here(*a, **k):
        raise AssertionError("the parent compiled a kernel: the workers' cache entry was missed")

    monkeypatch.setattr(compiler.ASTSource, "make_ir", no_compile_here)
    x = torch.empty(1024)
    calls = [partial(sm90.add_kernel.warmup, x, x, x, 1024, BLOCK=b, grid=(1,), num_warps=4) for b in (64, 128, 96)]
    errors, rest = compile_pool.build(calls)
    assert rest == []
    assert len(errors) == 1 and "power of 2" in errors[0], errors  # BLOCK=96: tl.arange refuses it
    kernels = sm90.add_kernel.device_caches[0][0]
    assert len(kernels) == 2 and all(k.metadata.target.arch == 90 for k in kernels.values())
    cached = [p for p in Path(os.environ["TRITON_CACHE_DIR"]).glob("*/add_kernel.cubin")]
    assert len(cached) == 2  # written by the workers: the parent compiled nothing
    pids = compile_pool.worker_pids()
    assert len(pids) == 2 and os.getpid() not in pids
    compile_pool.shutdown()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_precompile_all_says_how_candidates_compiled(sm90, monkeypatch):
    """The config search's notes say where the candidates compiled: in the pool, or in threads and why."""
    import torch

    x = torch.empty(256)
    monkeypatch.setattr(tune, "launches", lambda src, cfg: [("add_kernel", (1,), ("x", "x", "x", "n"),
                                                             {"BLOCK": cfg["BLOCK"], "num_warps": 4})])
    tensors = {"x": x, "n": 256}
    notes: list[str] = []
    assert tune.precompile_all(sm90, None, [{"BLOCK": 32}, {"BLOCK": 64}], tensors, notes) == []
    assert notes == ["config search: candidates compiled in 2 worker processes"]
    compile_pool.shutdown()
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "0")
    notes = []
    assert tune.precompile_all(sm90, None, [{"BLOCK": 128}], tensors, notes) == []
    assert notes == [f"config search: candidates compiled in threads, not worker processes: "
                     f"{compile_pool.WORKERS_ENV}=0"]
    assert len(sm90.add_kernel.device_caches[0][0]) == 3


def test_without_a_gpu_target_the_pool_is_not_used(monkeypatch):
    """No active GPU driver (this CPU machine, as is): the pool says why it cannot compile, starting nothing."""
    from triton.runtime.driver import driver

    class NoDriver:
        def get_current_target(self):
            raise RuntimeError("0 active drivers ([]). There should only be one.")

    monkeypatch.setattr(driver, "_active", NoDriver())
    with pytest.raises(compile_pool.PoolUnavailable, match="no GPU target .*0 active drivers"):
        compile_pool.build([lambda: None])
    assert compile_pool.worker_pids() == []


def test_a_compile_that_hangs_is_cut_off_and_its_worker_stopped(sm90, tmp_path, monkeypatch):
    """A job still running at its deadline is an error in words, and the pool's workers are stopped."""
    slow = tmp_path / "slow_module.py"
    slow.write_text("import time\ntime.sleep(120)\n")
    job = compile_pool.CompileJob("bakeoff_test_slow_module", str(slow), "add_kernel", {}, {}, {}, {},
                                  Sm90Driver().get_current_target(), {})
    monkeypatch.setattr(compile_pool, "CANDIDATE_TIMEOUT_S", 3.0)
    compile_pool.pool()
    pids = compile_pool.worker_pids()
    t0 = time.monotonic()
    out = compile_pool.compile_all([job])
    assert time.monotonic() - t0 < 30
    assert list(out.values()) == ["TimeoutError: not compiled within 3 s in a compile worker"]
    assert compile_pool.worker_pids() == []
    time.sleep(1)
    assert not any(_alive(p) for p in pids)


def test_workers_exit_when_the_process_that_started_them_is_killed(tmp_path):
    """A case's process killed outright (no atexit) leaves no compile worker behind."""
    script = textwrap.dedent(f'''
        import os, signal
        os.environ["{compile_pool.WORKERS_ENV}"] = "2"
        from bakeoff.backends.tritongen import compile_pool
        compile_pool.pool()
        print(" ".join(map(str, compile_pool.worker_pids())), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    ''')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).parents[1]),
                                                                  os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=240)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids)
