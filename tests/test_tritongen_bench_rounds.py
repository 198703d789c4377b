"""benchmarks/tritongen_vs_inductor.py times a case's calls in interleaved rounds: on made-up timers, each call's
figure is the median of its rounds, and a clock drifting through the case weighs on every call alike."""
from __future__ import annotations

import pytest

pytest.importorskip("triton")  # the benchmark imports triton.testing.do_bench

from benchmarks import tritongen_vs_inductor as tvi  # noqa: E402


def test_rounds_alternate_the_order_and_take_each_calls_median():
    order: list[str] = []
    ms = {"a": iter([1.0, 9.0, 1.2, 1.1, 1.3]), "b": iter([2.0, 2.2, 2.1, 2.4, 2.3])}

    def bench(call, rep_ms):
        assert rep_ms == 50
        order.append(call)
        return next(ms[call])

    medians, rounds = tvi.interleaved_ms({"a": "a", "b": "b"}, 50, rounds=5, bench=bench)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]  # AB BA AB BA AB
    assert rounds == {"a": [1.0, 9.0, 1.2, 1.1, 1.3], "b": [2.0, 2.2, 2.1, 2.4, 2.3]}
    assert medians == {"a": 1.2, "b": 2.2}  # one disturbed round does not move the median


def test_a_clock_that_drifts_through_the_case_weighs_on_every_call_alike():
    """Three calls of the same cost on a device slowing 2% with every figure taken: timed one after the other each
    reads 2% slower than the one before; in alternating rounds their medians agree within 0.2%."""
    taken = []

    def bench(call, rep_ms):
        taken.append(call)
        return 1.0 * 1.02 ** (len(taken) - 1)

    medians, _ = tvi.interleaved_ms({"first": "x", "second": "y", "third": "z"}, 50, rounds=4, bench=bench)
    assert max(medians.values()) / min(medians.values()) - 1 < 0.002  # one after the other: 2% and 4% apart


@pytest.mark.parametrize("name", ["softmax", "gemm_bias_gelu"])
def test_a_case_is_graded_on_its_rounds_medians(monkeypatch, name):
    """run_case's wiring on the CPU, with the GPU's parts stood in for (tritongen's compile, torch.compile, CUDA
    graphs, do_bench, the float64 reference): every call, the ceiling's included, is timed in the rounds, and
    the grade reads their medians."""
    import dataclasses
    from types import SimpleNamespace

    import torch

    from bakeoff.workloads.suite import builtin_workloads

    w = builtin_workloads()[name]
    small = {name: dataclasses.replace(w, presets={"gpu": w.presets["smoke"]})}
    timed = []

    class Compiled:  # tritongen's compiled graph: eager's answer, on the CPU
        info = SimpleNamespace(stages_s={}, notes=[])

        def __init__(self, graph):
            self.fn = tvi.lower_torch(graph)

        def __call__(self, *xs):
            return self.fn(*xs)

        def artifacts(self):
            return {}

        def prepare(self, xs):
            return xs

        def run(self, xs):
            return self.fn(*xs)

    def bench(call, rep_ms):
        timed.append(call)
        return 2.0

    monkeypatch.setattr(tvi, "builtin_workloads", lambda: small)
    monkeypatch.setattr(tvi, "compile_tritongen", lambda graph, options: Compiled(graph))
    monkeypatch.setattr(tvi.torch, "compile", lambda fn, backend: fn)
    monkeypatch.setattr(tvi.torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(tvi.torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(tvi, "make_inputs", lambda graph, seed, device: tvi_inputs(graph, seed))
    monkeypatch.setattr(tvi, "fp64_errors", lambda w, p, d, xs, outs: {k: 1e-3 for k in outs})
    monkeypatch.setattr(tvi, "graph_of", lambda compiled, prepared: None)
    monkeypatch.setattr(tvi, "bench_ms", bench)
    monkeypatch.setattr(tvi, "same_size_copy_tb_s", lambda nbytes, ceil: 1.0)
    monkeypatch.setattr(tvi, "ceiling_calls", lambda category, dtype: {"mm": lambda: None} if category == "gemm"
                        else {})
    ceil = {"copy_tb_s": 3.0, "mm_tflop_s": {"float32": 50.0}, "sdpa_ms": {"float32": 20.0}}
    rec = tvi.run_case(name, "float32", ceil, 50, {})
    calls = 4 if name == "gemm_bias_gelu" else 3
    assert len(timed) == calls * tvi.BENCH_ROUNDS and rec["correct"]
    assert rec["tritongen_ms"] == rec["inductor_ms"] == rec["eager_ms"] == 2.0 and rec["tritongen_graph_ms"] is None
    assert rec["vs_inductor"] == 1.0 and len(rec["rounds_ms"]["tritongen"]) == tvi.BENCH_ROUNDS
    if name == "gemm_bias_gelu":  # against torch.mm timed in the rounds (2 ms), not the run's 50 TFLOP/s
        assert rec["mm_ms"] == 2.0 and rec["pct"] == pytest.approx(rec["flops"] / (2 * 8192**3))


def tvi_inputs(graph, seed):
    from bakeoff.harness.worker.input_tensors import make_inputs

    return make_inputs(graph, seed, "cpu")


def test_a_speedup_whose_rounds_disagree_is_marked(capsys):
    """The speedup over Inductor is also taken round by round (the two are timed side by side in each); one whose
    rounds spread more than ROUND_SPREAD_MARK is marked "~" in the table, one whose rounds agree is not."""
    steady = {"tritongen": [1.0, 1.0, 1.01], "inductor": [1.2, 1.21, 1.2]}
    swinging = {"tritongen": [6.79, 8.12, 6.95], "inductor": [6.75, 8.15, 6.82]}  # the H100's 16-bit mlp_block
    assert tvi.round_ratios(steady, "inductor") == pytest.approx([1.2, 1.21, 1.2 / 1.01])
    ratios = tvi.round_ratios(swinging, "inductor")
    assert max(ratios) / min(ratios) - 1 < tvi.ROUND_SPREAD_MARK  # side by side, the rounds' swings cancel

    def rec(name, rounds, ind_ms):
        per = tvi.round_ratios(rounds, "inductor")
        return {"workload": name, "dtype": "bfloat16", "tritongen_ms": 1.0, "inductor_ms": ind_ms, "eager_ms": 2.0,
                "vs_inductor": ind_ms, "vs_eager": 2.0, "pct": 1.0, "ceiling": "ind", "misses": [],
                "tritongen_rel_l2_vs_fp64": 1e-3, "err_ratio_vs_eager": 1.0, "tritongen_compile_s": 1.0,
                "tritongen_warm_compile_s": 0.0, "inductor_compile_s": 1.0, "vs_inductor_rounds": per,
                "vs_inductor_round_spread": max(per) / min(per) - 1}
    apart = {"tritongen": [1.0, 1.0, 1.0], "inductor": [1.0, 1.2, 0.95]}
    ceil = {"mm_tflop_s": {}, "sdpa_ms": {}, "copy_tb_s": 3.0}
    tvi.report([rec("steady", steady, 1.2), rec("apart", apart, 1.0)], ceil)
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith(("steady", "apart"))}
    assert " 1.20  " in rows["steady"] and "~" not in rows["steady"]
    assert " 1.00~ " in rows["apart"]


def _paired_store(path, runs, rows):
    """A store with the columns `paired_records` reads: runs (run_id, started_at), records (run_id, workload,
    dtype, backend, speedup_vs_eager, compile_s, latency_ms_median, eager_latency_ms_median; status ok)."""
    import sqlite3

    con = sqlite3.connect(path)
    con.execute("create table runs (run_id text, started_at text)")
    con.execute("create table records (run_id text, workload text, dtype text, backend text, status text, "
                "speedup_vs_eager real, compile_s real, details text, latency_ms_median real, "
                "eager_latency_ms_median real)")
    con.executemany("insert into runs values (?, ?)", runs)
    con.executemany("insert into records values (?, ?, ?, ?, 'ok', ?, ?, '{}', ?, ?)", rows)
    con.commit()
    return f"sqlite:///{path}"


def test_paired_speedups_of_a_suite_split_over_stores_read_as_one_table(tmp_path, capsys):
    """--paired with two stores: each store's newest run, one table and one geomean over both (a case in both:
    the later store's figures)."""
    def store(name, runs, rows):
        return _paired_store(tmp_path / name, runs, rows)

    def pair(run, workload, tg, ind, tg_compile_s=0.5, ind_compile_s=1.0):
        return [(run, workload, "bfloat16", "tritongen", tg, tg_compile_s, 1.0 / tg, 1.0),
                (run, workload, "bfloat16", "inductor", ind, ind_compile_s, 1.0 / ind, 1.0)]

    a = store("a.db", [("old", "2026-01-01"), ("new", "2026-01-02")],
              pair("old", "softmax", 9.0, 9.0) + pair("new", "softmax", 4.0, 2.0) + pair("new", "rmsnorm", 1.0, 1.0))
    b = store("b.db", [("other", "2026-01-03")],
              pair("other", "attention", 1.0, 1.0, 2.0, 0.2) + pair("other", "rmsnorm", 2.0, 1.0))
    runs, df = tvi.paired_records([a, b])
    assert [r.split()[0] for r in runs] == ["new", "other"] and len(df) == 6
    tvi.paired_report([a, b])
    out = capsys.readouterr().out
    assert "runs new" in out and "over 3" in out and "1.587" in out  # geomean of 2.0, 2.0 (rmsnorm: b's), 1.0
    assert "cold compile longer than Inductor's: 1 of 3 cases" in out
    assert "~" not in out  # eager's medians agree in every pair


def test_a_paired_ratio_that_carries_eager_s_move_is_marked(tmp_path, capsys):
    """tritongen / Inductor divides two speedups over eager timed in two cases; where eager's own median moved
    more than EAGER_APART_REL between them (an H100's 16-bit RMSNorm: 0.113 against 0.128 ms, both backends at
    0.093-0.094 ms), the ratio is marked "~" beside the ratio of the backends' own headlines, and the geomean is
    also given with that ratio in its place."""
    rows = [("rmsnorm", "tritongen", 0.1129 / 0.0928, 0.0928, 0.1129), ("rmsnorm", "inductor", 0.1278 / 0.0943,
            0.0943, 0.1278), ("softmax", "tritongen", 2.0, 0.1, 0.2), ("softmax", "inductor", 1.0, 0.2, 0.2)]
    rows = [("r", w, "float16", b, sp, 1.0, ms, eager_ms) for w, b, sp, ms, eager_ms in rows]
    tvi.paired_report([_paired_store(tmp_path / "s.db", [("r", "2026-01-01")], rows)])
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith(("rmsnorm", "softmax"))}
    assert " 0.90~  1.02 " in lines["rmsnorm"] and "~" not in lines["softmax"]
    assert "fp16: 1.340 over 2; with the ~ ratios at their own headlines' 1.426" in out
    assert "(1 of them)" in out
