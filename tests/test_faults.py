"""A worker that crashes, hangs or fails yields the right record while the other cases complete,
one worker at a time and with two in parallel (`--jobs 2`), on the CPU; CUDA out-of-memory on a GPU."""
import itertools
import json

import pytest
import torch

from conftest import bakeoff

CONFIG = """
name: faults
device: cpu
preset: smoke
dtypes: [float32]
workloads: [ew_sigmoid_relu]
backends:
  eager: {}
  abort: {backend: faulty, mode: abort}
  segfault: {backend: faulty, mode: segfault}
  hang: {backend: faulty, mode: hang}
  compile_error: {backend: faulty, mode: compile_error}
  run_error: {backend: faulty, mode: run_error}
  nan: {backend: faulty, mode: nan}
  wrong_shape: {backend: faulty, mode: wrong_shape}
  unwritten: {backend: faulty, mode: unwritten}
  perturb: {backend: faulty, mode: perturb, scale: 0.05}
  host_oom: {backend: faulty, mode: host_oom}
seeds: [0, 1]
timing: {warmup_s: 0.01, budget_s: 0.05, min_reps: 3}
compile: {warm: false}
timeout_s: 10
memory_limit_gb: 3
"""
# timeout_s: the hang case's wait, in each test. The other cases end in 1-4 s here (a worker's start, torch's
# import and the case; gate waits do not count), so 10 s keeps more than twice their time and no longer.

EXPECTED = {"eager": "ok", "abort": "crash", "segfault": "crash", "hang": "timeout",
            "compile_error": "compile_error", "run_error": "runtime_error", "nan": "mismatch",
            "wrong_shape": "mismatch", "unwritten": "mismatch", "perturb": "mismatch", "host_oom": "oom"}


def run_faults(tmp_path, config: str, *args: str) -> dict[str, dict]:
    """Run `config` through the CLI with `args`; the records by backend label."""
    (tmp_path / "faults.yaml").write_text(config)
    db = f"sqlite:///{tmp_path / 'f.db'}"
    bakeoff("run", "faults.yaml", "--db", db, *args, cwd=tmp_path, check=True)
    records = json.loads(bakeoff("export", "latest", "--db", db, cwd=tmp_path, check=True).stdout)
    return {r["backend"]: r for r in records}


def assert_fault_records(got: dict[str, dict]) -> None:
    assert {k: got[k]["status"] for k in EXPECTED} == EXPECTED
    assert "SIGABRT" in got["abort"]["reason"]
    assert "SIGSEGV" in got["segfault"]["reason"]
    assert "injected compile error" in got["compile_error"]["reason"]
    assert "non-finite" in got["nan"]["reason"]
    assert "shape" in got["wrong_shape"]["reason"]
    # An output never written: on a GPU it reads the NaN poison; on the CPU poisoning cannot reach malloc's
    # blocks, so it reads zeros or stale data (docs/MEASUREMENT.md), a mismatch beyond tolerance, or reads
    # NaN where it got a poisoned block. Either way it is a numeric mismatch with its numbers, never a pass.
    unwritten = got["unwritten"]
    assert "non-finite" in unwritten["reason"] or "beyond tolerance" in unwritten["reason"], unwritten["reason"]
    assert got["perturb"]["err_ratio_vs_eager"] > 2  # numbers are kept beside the verdict
    assert got["eager"]["latency_ms_median"] > 0
    for r in got.values():  # where the time went, dead or alive: phases_s covers wall_s
        assert abs(sum(r["phases_s"].values()) - r["wall_s"]) <= 0.05 * r["wall_s"], r["phases_s"]
    # A worker that died or was killed: the phases it finished, then 'unfinished' up to its end.
    for label in ("segfault", "abort", "hang"):
        assert got[label]["phases_s"]["unfinished"] > 0 and "eager_baseline" in got[label]["phases_s"], label
    assert got["hang"]["phases_s"]["unfinished"] > 0.5 * got["hang"]["wall_s"]


def test_fault_injection_statuses(tmp_path):
    got = run_faults(tmp_path, CONFIG)
    assert_fault_records(got)
    assert not any(r.get("rerun_alone_reason") for r in got.values())  # one slot: nothing shared its memory


def test_fault_injection_statuses_with_two_jobs(tmp_path):
    # Waiting for the timing gate does not count against the timeout, so the hang case stays as short here.
    got = run_faults(tmp_path, CONFIG, "--jobs", "2")
    assert_fault_records(got)
    assert {r["worker"] for r in got.values()} == {"cpu#0", "cpu#1"}  # both slots took cases
    windows = sorted(tuple(w) for r in got.values() for w in r.get("timing_windows_epoch_s") or [])
    assert len(windows) >= 4  # eager, nan, unwritten, perturb reach the timing step
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert end <= start  # no two timing phases overlapped
    # Out of memory beside another slot: run again once the others are done, alone; still oom, and said so.
    assert "1 other slots shared the device" in got["host_oom"]["rerun_alone_reason"]
    assert [k for k, r in got.items() if r.get("rerun_alone_reason")] == ["host_oom"]
    others_end = max(r["created_at"] for k, r in got.items() if k != "host_oom")
    assert got["host_oom"]["created_at"] >= others_end


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="needs a CUDA device: the case asks the GPU for twice its memory")
def test_cuda_out_of_memory_is_an_oom_record(tmp_path):
    config = CONFIG.replace("device: cpu", "device: cuda").replace("memory_limit_gb: 3\n", "")
    backends = ("backends:\n  eager: {}\n  cuda_oom: {backend: faulty, mode: cuda_oom}\n"
                "  run_error: {backend: faulty, mode: run_error}\n  unwritten: {backend: faulty, mode: unwritten}\n")
    config = with_backends(config, backends)
    for jobs in ("1", "2"):
        got = run_faults(tmp_path / jobs, config, "--jobs", jobs)
        assert {k: r["status"] for k, r in got.items()} == {"eager": "ok", "cuda_oom": "oom",
                                                              "run_error": "runtime_error",
                                                              "unwritten": "mismatch"}, got
        assert "out of memory" in got["cuda_oom"]["reason"].lower()
        # On a GPU the caching allocator hands back the NaN-filled blocks: the reason is specific.
        assert "non-finite" in got["unwritten"]["reason"], got["unwritten"]["reason"]



def with_backends(config: str, backends: str) -> str:
    """`config` with its backends section replaced by `backends` (YAML lines)."""
    return config[:config.index("backends:")] + backends + config[config.index("seeds:"):]


# Warm compile on, and time for a warm process beside the cold one of the other slot.
WARM_OOM = with_backends(CONFIG, "backends:\n  eager: {}\n  fine: {backend: faulty, mode: none}\n"
                                 "  warm_oom: {backend: faulty, mode: warm_oom}\n").replace(
    "compile: {warm: false}", "compile: {warm: true}").replace("timeout_s: 10", "timeout_s: 30")


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_warm_compile_out_of_memory_beside_other_slots_runs_again_alone(tmp_path, jobs):
    """The cold run is ok and the warm process runs out of memory: with a slot beside it that may have been the
    other slot's memory, so the case runs again alone at the end and says why; with one slot it stays as it is."""
    got = run_faults(tmp_path, WARM_OOM, "--jobs", jobs)
    case = got["warm_oom"]
    assert case["status"] == "ok" and "MemoryError" in case["warm_error"]
    assert got["fine"].get("compile_warm_s") is not None and not got["fine"].get("warm_error")
    if jobs == "1":
        assert not any(r.get("rerun_alone_reason") for r in got.values())
    else:
        assert "its first warm compile ran out of memory while 1 other slots" in case["rerun_alone_reason"]
        assert [k for k, r in got.items() if r.get("rerun_alone_reason")] == ["warm_oom"]
        assert case["created_at"] >= max(r["created_at"] for k, r in got.items() if k != "warm_oom")
