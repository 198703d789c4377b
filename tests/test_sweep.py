"""Shape sweeps (issue 14 part 1): config errors exit 2 with file:line:field; padding soundness from the ops;
one sweep through the CLI at smoke size: Inductor dynamic compiles fewer times than static (Dynamo's
counters), XLA recompiles once per distinct shape and once per bucket, every point is checked (a backend
wrong at one point only fails there), show prints the sweep lines and the report charts them."""
from __future__ import annotations

import json

import pytest

from conftest import bakeoff

from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.decompose import decompose
from bakeoff.workloads.padding import padding_refusal
from bakeoff.workloads.suite import every_workload

HEAD = "name: t\ndevice: cpu\npreset: smoke\nworkloads:\n  - name: layernorm_gelu\n"
BAD = [
    ("dim not in the graph", HEAD + "    sweep: {dim: S, values: [16, 32]}\n", 6, "'S' is not a dim of this workload"),
    ("one value", HEAD + "    sweep: {dim: M, values: [16]}\n", 6, "at least 2 items"),
    ("one distinct value", HEAD + "    sweep: {dim: M, values: [16, 16]}\n", 6, "at least two distinct values"),
    ("stop below start", HEAD + "    sweep: {dim: M, range: {start: 64, stop: 16, step: 8}}\n", 6,
     "must be greater than start"),
    ("step and multiply", HEAD + "    sweep: {dim: M, range: {start: 16, stop: 64, step: 8, multiply: 2}}\n", 6,
     "one of `step`"),
    ("range with one value", HEAD + "    sweep: {dim: M, range: {start: 16, stop: 20, multiply: 2}}\n", 6,
     "holds only 16"),
    ("zero value", HEAD + "    sweep: {dim: M, values: [0, 16]}\n", 6, "greater than 0"),
    ("too large at the largest value", HEAD + "    sweep: {dim: M, values: [16, 2000000000]}\n", 5,
     "shape too large"),
]


@pytest.mark.parametrize("what,text,line,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_sweep_exits_2_with_file_line_field(tmp_path, what, text, line, needle):
    (tmp_path / "bad.yaml").write_text(text)
    proc = bakeoff("run", "bad.yaml", "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"bad.yaml:{line}:" in proc.stderr and needle in proc.stderr, proc.stderr
    assert "sweep" in proc.stderr or "shape too large" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]  # nothing written


def _attention(causal: bool, scale: float | None = None):
    b = GraphBuilder("attn")
    q, k, v = (b.input(n, ("B", "H", "S", "Dh")) for n in "qkv")
    return b.finish([b.sdpa(q, k, v, causal=causal, scale=scale)])


def test_padding_soundness_follows_the_ops():
    suite = every_workload()
    assert padding_refusal(suite["attention"].graph, "S") is None          # causal: padded keys masked
    assert "without a causal mask" in padding_refusal(_attention(False), "S")
    assert "head dim" in padding_refusal(suite["attention"].graph, "Dh")
    assert padding_refusal(suite["layernorm_gelu"].graph, "M") is None     # rows
    assert "layer_norm" in padding_refusal(suite["layernorm_gelu"].graph, "N")
    assert "softmax" in padding_refusal(suite["softmax"].graph, "N")
    assert "contracts" in padding_refusal(suite["gemm_bias_gelu"].graph, "K")
    assert padding_refusal(suite["attn_block"].graph, "S") is None         # reshapes keep S in place
    # decomposed: mask, max, exp, sum, div, matmul over the masked padded keys: sound only when causal
    assert padding_refusal(decompose(_attention(True, 0.25)), "S") is None
    assert "max over the padded axis" in padding_refusal(decompose(_attention(False, 0.25)), "S")
    b = GraphBuilder("flat")
    x = b.input("x", ("S", "H"))
    assert "product holding S" in padding_refusal(b.finish([b.reshape(x, shape=("S*H",))]), "S")


CONFIG = """
name: sweep-test
device: cpu
preset: smoke
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.2, min_reps: 3}
timeout_s: 300
workloads:
  - name: layernorm_gelu
    sweep: {dim: M, values: [16, 20, 24, 40]}
  - name: softmax
    sweep: {dim: N, values: [16, 24]}
backends:
  inductor-dynamic: {backend: inductor, dynamic: true}
  inductor-static: {backend: inductor, dynamic: false}
  xla-recompile: {backend: xla, shapes: recompile}
  xla-bucket: {backend: xla, shapes: bucket}
  wrong-at-40: {backend: faulty, mode: zeros, only_at_shape: [40, 300]}
"""


def test_a_sweep_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.setenv("BAKEOFF_PRESTART", "0")  # no spares importing while the points time
    (tmp_path / "sweep.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 's.db'}"
    run = bakeoff("run", "sweep.yaml", "--db", db, "--workload", "layernorm_gelu", cwd=tmp_path, timeout=900)
    assert run.returncode in (0, 1), run.stderr[-3000:]
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    got = {r["backend"]: r for r in records}
    assert all(r["case_id"].startswith("layernorm_gelu/M=sweep[16..40],N=300/") for r in records)
    for label in ("inductor-dynamic", "inductor-static", "xla-recompile", "xla-bucket"):
        r = got[label]
        assert r["status"] == "ok", (label, r.get("reason"))
        assert [p["value"] for p in r["sweep"]] == [16, 20, 24, 40]
        assert all(p["status"] == "ok" and p["err_rel_l2_vs_fp64"] is not None and p["checked_seeds"] == [0, 1]
                   and p["headline_ms"] > 0 and p["first_result_s"] > 0 for p in r["sweep"]), r["sweep"]
        assert r["sweep_serve_s"] >= sum(p["first_result_s"] for p in r["sweep"])
    dyn, static = got["inductor-dynamic"], got["inductor-static"]
    assert dyn["sweep_compiles"] == 1 and static["sweep_compiles"] == 4, (dyn["sweep_compiles"],
                                                                          static["sweep_compiles"])
    assert "unique_graphs" in dyn["sweep_compile_counter"]
    assert [p["recompiled"] for p in dyn["sweep"]] == [True, False, False, False]
    assert got["xla-recompile"]["sweep_compiles"] == 4               # one per distinct shape
    assert got["xla-bucket"]["sweep_compiles"] == 3                  # buckets 16, 32, 64
    assert [p["recompiled"] for p in got["xla-bucket"]["sweep"]] == [True, True, False, True]
    wrong = got["wrong-at-40"]
    assert wrong["status"] == "mismatch" and "'M': 40" in wrong["reason"], wrong["reason"]
    assert [p["status"] for p in wrong["sweep"]] == ["ok", "ok", "ok", "mismatch"]
    assert wrong["sweep_points_ok"] == 3
    # digests: the same graph at one shape digests differently from the sweep that starts there
    assert len({r["graph_digest"] for r in records}) == 1
    shown = bakeoff("show", "--db", db, cwd=tmp_path, check=True).stdout
    assert "sweep layernorm_gelu/M=sweep[16..40],N=300/float32/inductor-dynamic: 1 compile" in shown, shown
    assert "4 compiles (at M=16,20,24,40)" in shown and "3/4 points ok" in shown, shown
    bakeoff("report", "--db", db, "-o", "r.html", "--cdn", cwd=tmp_path, check=True)
    page = (tmp_path / "r.html").read_text()
    assert "Shape sweeps" in page and 'id="sweep-0"' in page


def test_bucket_refused_where_padding_is_unsound(tmp_path):
    (tmp_path / "sweep.yaml").write_text(CONFIG)
    db = f"sqlite:///{tmp_path / 's.db'}"
    bakeoff("run", "sweep.yaml", "--db", db, "--workload", "softmax", "--backend", "xla-bucket", cwd=tmp_path,
            check=True, timeout=120)
    (r,) = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    assert r["status"] == "skipped" and "softmax over the padded axis N" in r["reason"], r["reason"]
