"""tritongen's cold compile on the CPU, with fakes: the search's one batch of compiles (every kernel's candidates,
launcher stubs built beside them, errors said per candidate), the twins searched alone and their fallback, and
do_bench's window taken from the previous round. No timing is judged."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported anywhere in this process

import threading
import time
from types import SimpleNamespace

import pytest

from ci_required import importorskip

importorskip("triton", reason="triton is not installed (pip install 'bakeoff[triton]')")

from tritongen_fakes import async_fn  # noqa: E402

from bakeoff.backends.tritongen import compile_batch, tune  # noqa: E402
from bakeoff.backends.tritongen.configs import PRUNED, PRUNED_TWINS, candidates, pruned_count  # noqa: E402
from bakeoff.workloads.ir import bind  # noqa: E402
from bakeoff.workloads.suite import builtin_workloads  # noqa: E402


class _Kernel:
    """What Triton's compile returns, as far as the launcher prebuild reads it."""

    def __init__(self, sig):
        self.src = SimpleNamespace(signature={0: sig}, constants={})
        self.metadata = SimpleNamespace(tensordesc_meta=None)


def test_one_batch_says_each_candidates_error_and_builds_each_signatures_launcher_once(monkeypatch):
    """Every call's kernels compile in one AsyncCompileMode on several threads; a failed compile is said for its
    own call only; each compiled kernel's launcher stub is built in the compile thread, once per signature."""
    from triton.runtime.driver import driver

    built, lock, threads = [], threading.Lock(), set()

    class Launcher:
        def __init__(self, src, metadata):
            with lock:
                built.append(src.signature[0])
                threads.add(threading.get_ident())
            time.sleep(0.05)

    monkeypatch.setattr(driver, "_active", SimpleNamespace(launcher_cls=Launcher))
    compile_batch._BUILT.clear()
    compile_batch._DONE.clear()

    def compile_fn(name):
        time.sleep(0.1)
        if name == "bad":
            raise RuntimeError("out of resource: shared memory")
        return _Kernel("*bf16" if name != "c" else "*fp32")

    fn = async_fn(compile_fn)
    calls = [lambda n=n: [fn.warmup(grid=(1,), NAME=n)] for n in ("a", "b", "bad", "c")]
    calls.append(lambda: (_ for _ in ()).throw(KeyError("k5_matmul_ahi")))  # a call that raises by itself
    said = compile_batch.compile_jobs(calls, threads=4)
    assert said[:2] == [None, None] and said[3] is None
    assert said[2] == "RuntimeError: out of resource: shared memory"
    assert said[4] == "KeyError: 'k5_matmul_ahi'"
    assert sorted(built) == ["*bf16", "*fp32"] and threads != {threading.get_ident()}


def test_a_stub_is_built_while_its_kernel_compiles_unless_it_needs_the_compiled_kernel(monkeypatch):
    """The source Triton's JIT closes over in an async compile is enough for the launcher stub: it is built in a
    thread of its own while the kernel compiles, once; a signature with a host TMA descriptor waits for the
    compile, whose metadata holds the descriptor's layout."""
    import inspect

    from triton.runtime import _async_compile
    from triton.runtime.driver import driver

    events, lock = [], threading.Lock()

    class Launcher:
        def __init__(self, src, metadata):
            with lock:
                events.append(("stub", src.signature[0], time.perf_counter()))
            time.sleep(0.05)

    monkeypatch.setattr(driver, "_active", SimpleNamespace(launcher_cls=Launcher))
    compile_batch._BUILT.clear()
    compile_batch._DONE.clear()

    def async_compile_of(sig):
        src = SimpleNamespace(fn=object(), signature={0: sig}, constants={"BLOCK": 64})

        def async_compile():  # closes over the source, as the function Triton's JIT submits does
            time.sleep(0.2)
            with lock:
                events.append(("compiled", sig, time.perf_counter()))
            return SimpleNamespace(src=src, metadata=SimpleNamespace(tensordesc_meta=[]))
        return async_compile

    def call(sig):
        mode = _async_compile.active_mode.get()
        hooks = (lambda kernel: None,) * (len(inspect.signature(mode.submit).parameters) - 2)
        return [mode.submit(sig, async_compile_of(sig), *hooks)]

    desc = "tensordesc<bf16[128, 64]>"
    assert compile_batch.compile_jobs([lambda: call("*bf16"), lambda: call(desc)], threads=1) == [None, None]
    when = {(e, s): t for e, s, t in events}
    assert sorted(e for e, s, _ in events if s == "*bf16") == ["compiled", "stub"]  # one stub, not two
    assert when[("stub", "*bf16")] < when[("compiled", "*bf16")]
    assert when[("compiled", desc)] < when[("stub", desc)]
    assert compile_batch.source_before_compile(lambda: None) is None


def test_a_stub_that_fails_before_the_compile_ends_is_built_again_after_it(monkeypatch):
    from triton.runtime.driver import driver

    tried = []

    class Launcher:
        def __init__(self, src, metadata):
            tried.append(metadata is compile_batch._BEFORE_COMPILE)
            if metadata is compile_batch._BEFORE_COMPILE:
                raise AttributeError("a newer Triton's launcher reads more of the compiled kernel")

    monkeypatch.setattr(driver, "_active", SimpleNamespace(launcher_cls=Launcher))
    compile_batch._BUILT.clear()
    compile_batch._DONE.clear()
    src = SimpleNamespace(fn=object(), signature={0: "*bf16"}, constants={})
    compile_batch.prebuild_launcher(src, compile_batch._BEFORE_COMPILE, compiled=False)
    compile_batch.prebuild_launcher(src, SimpleNamespace(tensordesc_meta=[]))
    compile_batch.prebuild_launcher(src, SimpleNamespace(tensordesc_meta=None))  # the same stub: not again
    assert tried == [True, False]


def test_attn_block_float32_searches_once_per_shape_and_compiles_the_output_projection_beside_the_rest():
    """attn_block's Q, K, V and output projections share one search; the output projection (another epilogue,
    another source) is compiled under the search's first candidate in the same batch; the pre-split float32
    matmul and attention are searched alone (PRUNED_TWINS), with the rest of their lists as fallback; the float32
    LayerNorm times its two looped twins and the persistent kernel."""
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.fusion import fuse
    from bakeoff.backends.tritongen.shared import shared_kernels

    w = builtin_workloads()["attn_block"]
    plan = fuse(bind(w.graph, w.presets["gpu"], "float32"))
    sources = shared_kernels(generate_all(plan, target_from_options(TritonGenOptions(), False, "float32", 90)))
    groups = tune.search_groups(sources, "float32", "cuda", False, sms=132)
    kinds = [(sources[m[0]].kernel.kind, len(m), len(cfgs), len(rest) > 0) for m, cfgs, rest in groups]
    assert kinds == [("rowreduce", 1, 3, True), ("matmul", 4, 1, True), ("attention", 1, 1, True)]
    jobs = tune.compile_jobs_of(groups, sources)
    matmuls = groups[1][0]
    texts = {sources[i].text for i in matmuls}
    assert len(texts) == 2  # Q, K, V run one function (shared.py); the output projection adds its residual
    assert [(g, i) for g, i, _ in jobs if g == 1] == [(1, matmuls[0]), (1, matmuls[3])]
    assert all(c == groups[1][1][0] for g, _, c in jobs if g == 1)
    assert {n for n, _ in tune.group_scratch(groups, sources)} >= {n for n, _ in sources[matmuls[3]].scratch()}
    wide = tune.search_groups(sources, "float32", "cuda", True, sms=132)
    assert all(rest == [] and len(cfgs) >= 2 for _, cfgs, rest in wide)


def test_pruned_counts_of_the_twins_searched_alone():
    def src(kind, split=None, gluon=None):
        return SimpleNamespace(kernel=SimpleNamespace(kind=kind), split=split, gluon=gluon)

    two = [{"BLOCK_M": 128}, {"BLOCK_M": 64}]
    assert PRUNED_TWINS == {"gluon": 1, "split_attention": 1, "split_matmul": 1, "ptma": 1}
    assert pruned_count(src("attention", gluon=("q", "k", "v", "o")), two) == 1
    assert pruned_count(src("attention", split={"planes": []}), two) == 1
    assert pruned_count(src("attention"), two) == PRUNED["attention"] == 2
    assert pruned_count(src("matmul", split={"planes": []}), two) == 1
    assert pruned_count(src("matmul", split={"planes": []}), [two[0], {**two[1], "SPLIT_K": 8}]) == 2  # long K
    assert pruned_count(src("matmul"), two) == 2
    persistent_tma_first = [{**two[0], "TMA": 2, "NUM_SMS": 132}, two[0]]  # a 16-bit matmul's list
    assert pruned_count(src("matmul"), persistent_tma_first) == 1
    assert pruned_count(src("matmul"), [two[0], {**two[0], "TMA": 2, "NUM_SMS": 132}]) == 2  # pointers first


def test_a_candidate_searched_alone_that_does_not_load_falls_back_to_the_rest(monkeypatch):
    """The one candidate compiles but fails Triton's load check (shared memory): said in the notes, and the rest
    of the list is compiled and timed instead."""
    import triton.testing

    monkeypatch.setattr(triton.testing, "do_bench", lambda fn, **_: (fn(), 1.0)[1])
    monkeypatch.setattr(tune, "set_tma_allocator", lambda device: None)
    src = SimpleNamespace(fn="k0_attention", variant="tma", split=None, text="", kernel=SimpleNamespace(kind="attention"))
    groups = [([0], [{"name": "GL"}], [{"name": "T1"}, {"name": "T2"}])]
    monkeypatch.setattr(tune, "search_groups", lambda *a, **k: groups)
    monkeypatch.setattr(tune, "compile_groups", lambda *a: [[]])
    monkeypatch.setattr(tune, "config_scratch", lambda src, cfg: ())
    monkeypatch.setattr(tune, "loads", lambda module, s, cfg, tensors: "OutOfResources: shared memory")
    compiled, launched = [], []
    monkeypatch.setattr(tune, "precompile_all", lambda module, s, cfgs, *a: compiled.extend(cfgs) or [])
    monkeypatch.setattr(tune, "launch", lambda module, s, cfg, tensors: launched.append(cfg["name"]))
    chosen, notes = tune._search(SimpleNamespace(buffers=[]), [src], [None], "bfloat16", "cpu")
    assert chosen == [{"name": "T1"}]
    assert compiled == [{"name": "T1"}, {"name": "T2"}] and set(launched) == {"T1", "T2"}
    assert any("GL'} failed: OutOfResources: shared memory" in n for n in notes)
    assert "k0_attention: no pruned candidate ran; the rest of the list searched" in notes


def test_a_long_kernels_window_comes_from_its_previous_round():
    """A kernel over rep / SEARCH_MIN_RUNS: without a hint, a first do_bench call estimates it and a second
    times it with a window of SEARCH_MIN_RUNS runs; with the previous round's time only the second is made."""
    calls = []

    def bench(fn, warmup, rep, return_mode):
        calls.append((warmup, rep))
        return 22.0

    assert tune._median_ms(bench, None) == 22.0
    assert calls == [(5, tune.SEARCH_REP_MS), (0, 111)]
    calls.clear()
    assert tune._median_ms(bench, None, hint_ms=22.4) == 22.0
    assert calls == [(0, 113)]
    calls.clear()
    tune._median_ms(lambda fn, warmup, rep, return_mode: calls.append((warmup, rep)) or 1.4, None, hint_ms=1.5)
    assert calls == [(5, tune.SEARCH_REP_MS)]  # a short kernel: one call, as before


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_the_pruned_search_keeps_the_h200_winners_first(dtype):
    """The first pruned candidate of each kernel is the config that won the H200 searches (NOTES.md): the
    persistent TMA matmul in 16-bit, the pre-split 64 x 32 attention tile and 128 x 128 x 32 matmul in float32."""
    from bakeoff.backends.tritongen import TritonGenOptions, target_from_options
    from bakeoff.backends.tritongen.codegen import generate_all
    from bakeoff.backends.tritongen.fusion import fuse

    w = builtin_workloads()["attn_block"]
    plan = fuse(bind(w.graph, w.presets["gpu"], dtype))
    firsts = {src.kernel.kind: candidates(src, dtype, sms=132, wide=False)[0]
              for src in generate_all(plan, target_from_options(TritonGenOptions(), False, dtype, 90))}
    if dtype == "float32":
        assert firsts["attention"] == {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2, "SPLIT": 1}
        assert (firsts["matmul"]["BLOCK_K"], firsts["matmul"]["SPLIT"], firsts["matmul"]["num_warps"]) == (32, 1, 8)
    else:
        assert firsts["matmul"]["TMA"] == 2 and firsts["matmul"]["BLOCK_N"] == 256


def test_a_warm_compile_of_a_pre_split_kernel_sets_the_allocator(monkeypatch):
    """Configs from the cache file (a warm compile: no search) still set the allocator the device-built TMA
    descriptors take their scratch from: float32 attention's pre-split twin says SPLIT and not TMA, and its warm
    compile failed at the first launch ("no allocator was set") while the cold one, whose search set it, ran."""
    set_for = []
    monkeypatch.setattr(tune, "set_tma_allocator", lambda device: set_for.append(device))
    monkeypatch.setattr(tune, "precompile", lambda module, src, cfg, dtypes: cfg)
    plan = SimpleNamespace(buffer=lambda name: SimpleNamespace(dtype="float32"))
    src = SimpleNamespace(params=("q",), variant="", split=None, scratch=lambda: (("q_hi", (64, 128)),))
    split_attention = {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2, "SPLIT": 1}
    assert tune.compile_winners(plan, [src], [None], [split_attention], "cuda:0") == [split_attention]
    assert set_for == ["cuda:0"]
    set_for.clear()
    tune.compile_winners(plan, [src], [None], [{"BLOCK": 1024, "num_warps": 4, "num_stages": 1}], "cuda:0")
    assert set_for == []  # a plain kernel leaves Triton's allocator alone
    assert tune.needs_allocator([SimpleNamespace(variant="", split={"planes": ()})])  # a source with a twin
