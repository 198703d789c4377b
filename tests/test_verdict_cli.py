"""Wrong answers through the real CLI, each a `mismatch` with its reason: zeros where the reference is -inf
(log(relu(x)) under a causal mask), one gross element, an output that goes wrong after the timed loop, a
cache-loaded (warm) executable that is wrong, and any finite output (zeros) where eager overflows float16 but
the float64 reference is finite. A correct backend (the fault injector in mode `none`) passes on the same
workloads."""
from __future__ import annotations

import json

from conftest import SMOKE_GATE, SMOKE_JOBS, bakeoff

CONFIG = """
name: verdict
device: cpu
preset: smoke
dtypes: [float16]
workloads:
  - name: masked_log
    expr: 'causal_mask(log(relu(x)))'
    inputs: {x: [M, N]}
    shapes: [{M: 24, N: 24}]
  - name: overflow
    expr: 'x * 1000.0 * 1000.0 * 0.000001'
    inputs: {x: [M, N]}
    shapes: [{M: 16, N: 64}]
backends:
  eager: {}
  correct: {backend: faulty, mode: none}
  nonfinite_zero: {backend: faulty, mode: nonfinite_zero}
  spike: {backend: faulty, mode: spike, value: 5.0}
  wrong_after: {backend: faulty, mode: wrong_after, calls: 4}
  stale_cache: {backend: faulty, mode: stale_cache}
  zeros: {backend: faulty, mode: zeros}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: true}
timeout_s: 120
"""


def _run(tmp_path, *args: str) -> dict[str, dict]:
    db = f"sqlite:///{tmp_path / 'v.db'}"
    bakeoff("run", "verdict.yaml", "--db", db, *args, cwd=tmp_path, check=True)
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    return {r["backend"]: r for r in records}


def test_each_wrong_answer_is_a_mismatch_through_the_cli(tmp_path):
    (tmp_path / "verdict.yaml").write_text(CONFIG)
    labels = ("eager", "correct", "nonfinite_zero", "spike", "wrong_after", "stale_cache")
    # Two slots, as the smoke run (conftest.py): verdicts do not depend on timing.
    got = _run(tmp_path, "--workload", "masked_log", "--jobs", str(SMOKE_JOBS), "--gate", SMOKE_GATE,
               *[f"--backend={b}" for b in labels])
    status = {k: (r["status"], r.get("reason")) for k, r in got.items()}
    assert status["eager"][0] == "ok" and status["correct"][0] == "ok", status
    assert got["correct"]["warm_check"] == "ok" and got["correct"]["post_timing_check"] == "ok"
    assert got["correct"]["err_nonfinite_mismatch_vs_fp64"] == 0
    nz = got["nonfinite_zero"]
    assert nz["status"] == "mismatch" and "-inf" in nz["reason"] and nz["err_nonfinite_mismatch_vs_fp64"] > 0
    assert got["spike"]["status"] == "mismatch", status["spike"]
    wa = got["wrong_after"]
    assert wa["status"] == "mismatch" and wa["reason"].startswith("output after the timed loop:"), wa["reason"]
    assert wa["post_timing_check"] == "mismatch" and wa["latency_ms_median"] > 0  # timed, then caught
    sc = got["stale_cache"]
    assert sc["status"] == "mismatch" and sc["reason"].startswith("warm (cache-loaded) executable:"), sc["reason"]
    assert sc["warm_check"] == "mismatch" and sc["cache_hit_warm"] is True


def test_zeros_where_eager_overflows_fail(tmp_path):
    (tmp_path / "verdict.yaml").write_text(CONFIG.replace("compile: {warm: true}", "compile: {warm: false}"))
    got = _run(tmp_path, "--workload", "overflow", "--backend", "eager", "--backend", "zeros")
    assert got["eager"]["status"] == "mismatch" and "non-finite" in got["eager"]["reason"]  # eager overflows
    z = got["zeros"]
    assert z["status"] == "mismatch" and "no yardstick" in z["reason"], z["reason"]
    assert z["err_ratio_vs_eager"] is None
