"""benchmarks/gpu.sh's tritongen job: the paired run and the do_bench table can go into two calls (TG_RUN_S=0 leaves
the run out, TG_TABLE=0 the table), and the table is left out, saying so, when too little of the call is left."""
from __future__ import annotations

import subprocess
from pathlib import Path

from test_gpu_sh_ort import _function


def _tritongen(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[str]]:
    """tritongen() with python3, the run and the packing stubbed; returns the result and the python3 calls."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "python3").write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n')
    (bin_dir / "python3").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    stubs = ['run_limited() { echo "run $1 s" >> "$CALLS"; mkdir -p results; : > results/bakeoff.db; }',
             'B() { echo "bakeoff $1" >> "$CALLS"; }', 'pack_out() { echo "packed $1"; }']
    script = "\n".join(["set -uo pipefail", _function("left_s"), _function("tritongen"), *stubs,
                        f'R="{tmp_path}/repo"; OUT="{tmp_path}/out"; T0=$(date +%s); JOBS=8', "tritongen"])
    base = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "CALLS": str(calls), "TG_CLOCK": "0"}
    got = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=base | env, cwd=work,
                         timeout=60)
    return got, calls.read_text().splitlines() if calls.exists() else []


def _table_calls(calls: list[str]) -> list[str]:
    return [c for c in calls if "tritongen_vs_inductor.py" in c and "--paired" not in c]


def test_the_run_alone_leaves_the_table_out_and_says_so(tmp_path):
    got, calls = _tritongen(tmp_path, {"TG_RUN_S": "500", "TG_TABLE": "0", "CALL_S": "578"})
    assert got.returncode == 0, got.stderr
    assert "run 500 s" in calls and any("--paired" in c for c in calls)
    assert not _table_calls(calls)
    assert "do_bench table left out (TG_TABLE=0" in got.stdout and "packed tritongen" in got.stdout


def test_the_table_alone_gets_the_call_less_a_margin(tmp_path):
    got, calls = _tritongen(tmp_path, {"TG_RUN_S": "0", "CALL_S": "300"})
    assert got.returncode == 0, got.stderr
    assert not any(c.startswith("run ") for c in calls)
    (table,) = _table_calls(calls)
    budget = int(table.split("--budget-s ")[1].split()[0])
    assert 245 <= budget <= 250 and "--dtypes bfloat16 float16 float32" in table
    assert f"do_bench exited 0 (budget {budget} s)" in got.stdout


def test_too_little_left_for_the_table_leaves_it_out(tmp_path):
    got, calls = _tritongen(tmp_path, {"TG_RUN_S": "0", "CALL_S": "100"})
    assert got.returncode == 0, got.stderr
    assert not _table_calls(calls)
    assert "do_bench table left out (TG_TABLE=1" in got.stdout
