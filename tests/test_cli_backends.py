"""configs/smoke.yaml through the real CLI on every backend, on two workloads: each runs and is checked
against the fp64 reference, or is skipped with the reason."""
import json
import shutil
from pathlib import Path

import pytest

import background_runs
from conftest import REPO, SMOKE_GATE, SMOKE_JOBS, bakeoff
from golden_smoke import GOLDEN, compare, summarize

BACKENDS = ("xla", "iree", "onnxruntime", "tensorrt")
RUN_TIMEOUT_S = 1800  # from the session's start: the run waits for the CPU the other tests leave idle


def background_run_args(work: Path) -> list[str]:
    """The run this module checks, started as the session begins at low priority (tests/background_runs.py),
    with two slots as the smoke run (conftest.py): nothing here judges timing."""
    shutil.copytree(REPO / "configs", work / "configs")
    args = ["run", "configs/smoke.yaml", "--db", f"sqlite:///{work / 'b.db'}", "-w", "layernorm_gelu",
            "-w", "attn_block", "--jobs", str(SMOKE_JOBS), "--gate", SMOKE_GATE]
    for b in BACKENDS:
        args += ["--backend", b]
    return args


@pytest.fixture(scope="module")
def records() -> list[dict]:
    work, _ = background_runs.collect(__name__, RUN_TIMEOUT_S)
    db = f"sqlite:///{work / 'b.db'}"
    return json.loads(bakeoff("export", "latest", "--db", db, cwd=work, check=True).stdout)


def test_smoke_config_on_all_backends(records):
    by = {(r["workload"], r["backend"]): r for r in records}
    assert len(by) == 2 * len(BACKENDS)
    for (workload, backend), r in by.items():
        if backend == "tensorrt":
            assert r["status"] == "skipped"
            assert "tensorrt" in r["reason"]
            continue
        assert r["status"] == "ok", (workload, backend, r["reason"], r.get("stderr_tail"))
        assert r["err_rel_l2_vs_fp64"] < 1e-4 and r["err_ratio_vs_eager"] < 2
        assert r["latency_ms_median"] > 0 and r["compile_s"] > 0
        assert r["compile_stages_s"], (backend, "stages recorded apart")
    assert by[("layernorm_gelu", "xla")]["cache_hit_warm"] is True
    assert by[("layernorm_gelu", "iree")]["artifacts"]["dispatch_count"] >= 1


def test_the_run_behaves_as_the_golden_file_says(records):
    """As tests/test_cli_smoke.py's test of the same name, for this run (tests/golden_smoke.py)."""
    problems = compare(json.loads(GOLDEN.read_text())["backends"], summarize(records))
    assert not problems, "\n".join(problems)
