"""tritongen's compile pool (bakeoff/backends/tritongen/compile_pool.py) on the CPU: real worker processes compile a
small kernel for sm_90 (Triton needs no GPU for that, as offline.py shows) into Triton's cache, and the parent's
own JIT path, aimed at sm_90 through a stand-in driver, then finds every kernel there instead of compiling it."""
import os

# As in the other tritongen tests: kernels that tritongen's modules define when imported run in the interpreter
# (this file compiles its own kernel for sm_90 in fresh interpreters, without it).
os.environ.setdefault("TRITON_INTERPRET", "1")

import signal
import subprocess
import sys
import textwrap
import time
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


# The JIT path runs in a fresh interpreter: in this one triton may have been imported in interpreter mode (the other
# tritongen tests set TRITON_INTERPRET=1 first), and that cannot be undone. The child aims Triton's JIT at sm_90
# through a stand-in driver, imports the kernel from its file as tune.load_kernels does, and forbids the parent's
# own compile pipeline (ASTSource.make_ir): every kernel the parent gets must come from the workers' cache.
PRELUDE = textwrap.dedent('''
    import importlib.util, os, sys
    from functools import partial
    from pathlib import Path
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.compiler import compiler
    from triton.runtime.driver import driver
    from bakeoff.backends.tritongen import compile_pool, tune

    class Sm90Driver:
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)
        def get_current_device(self):
            return 0
        def get_current_stream(self, device=None):
            return 0

    def no_compile_here(*a, **k):
        raise AssertionError("the parent compiled a kernel: the workers' cache entry was missed")

    driver.set_active(Sm90Driver())
    own_make_ir, compiler.ASTSource.make_ir = compiler.ASTSource.make_ir, no_compile_here
    spec = importlib.util.spec_from_file_location("bakeoff_test_gen_add", sys.argv[1])
    sm90 = importlib.util.module_from_spec(spec)
    sys.modules["bakeoff_test_gen_add"] = sm90
    spec.loader.exec_module(sm90)
''')


def _run_sm90(tmp_path: Path, body: str) -> str:
    """Run PRELUDE then `body` in a fresh interpreter (two compile workers, Triton's cache in tmp_path); its
    stdout, after asserting that it succeeded."""
    (tmp_path / "gen_add.py").write_text(KERNEL)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), **{compile_pool.WORKERS_ENV: "2"},
               PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), env.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body), str(tmp_path / "gen_add.py")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state  # a zombie has exited; reaping it is its new parent's part


def test_workers_fill_the_cache_that_the_parents_jit_path_hits(tmp_path):
    """Two candidates compile in worker processes; the parent's warmups that follow are cache hits (its own
    compile pipeline is never reached); a candidate the compiler refuses is an error in words, and is not
    compiled again in the parent; the workers are gone after shutdown."""
    out = _run_sm90(tmp_path, '''
        x = torch.empty(1024)
        calls = [partial(sm90.add_kernel.warmup, x, x, x, 1024, BLOCK=b, grid=(1,), num_warps=4)
                 for b in (64, 128, 96)]
        errors, rest = compile_pool.build(calls)
        assert rest == []
        assert len(errors) == 1 and "power of 2" in errors[0], errors  # BLOCK=96: tl.arange refuses it
        kernels = sm90.add_kernel.device_caches[0][0]
        assert len(kernels) == 2 and all(k.metadata.target.arch == 90 for k in kernels.values())
        pids = compile_pool.worker_pids()
        assert len(pids) == 2 and os.getpid() not in pids
        compile_pool.shutdown()
        print(" ".join(map(str, pids)))
    ''')
    assert len(list((tmp_path / "triton").glob("*/add_kernel.cubin"))) == 2  # the workers' compiles, no other
    pids = [int(p) for p in out.split()]
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_precompile_all_says_how_candidates_compiled(tmp_path):
    """The config search's notes say where the candidates compiled: in the pool, or in threads and why (these
    compile in the parent: its compile pipeline is given back for them)."""
    _run_sm90(tmp_path, '''
        tune.launches = lambda src, cfg: [("add_kernel", (1,), ("x", "x", "x", "n"),
                                           {"BLOCK": cfg["BLOCK"], "num_warps": 4})]
        tensors = {"x": torch.empty(256), "n": 256}
        notes = []
        assert tune.precompile_all(sm90, None, [{"BLOCK": 32}, {"BLOCK": 64}], tensors, notes) == []
        assert notes == ["config search: candidates compiled in 2 worker processes"], notes
        compile_pool.shutdown()
        os.environ[compile_pool.WORKERS_ENV] = "0"
        compiler.ASTSource.make_ir = own_make_ir
        notes = []
        assert tune.precompile_all(sm90, None, [{"BLOCK": 128}], tensors, notes) == []
        assert notes == ["config search: candidates compiled in threads, not worker processes: "
                         f"{compile_pool.WORKERS_ENV}=0 (the default: measured slower beside other cases)"], notes
        assert len(sm90.add_kernel.device_caches[0][0]) == 3
    ''')


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


def test_a_compile_that_hangs_is_cut_off_and_its_worker_stopped(tmp_path, monkeypatch):
    """A job still running at its deadline is an error in words, and the pool's workers are stopped."""
    slow = tmp_path / "slow_module.py"
    slow.write_text("import time\ntime.sleep(120)\n")
    job = compile_pool.CompileJob("bakeoff_test_slow_module", str(slow), "add_kernel", {}, {}, {}, {}, None, {})
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "2")
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
    compile_pool.shutdown()


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
