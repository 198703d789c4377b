"""`bakeoff run configs/numerics.yaml --preset smoke` through the real CLI on every backend CI installs (eager,
Inductor's C++ path, tritongen under Triton's interpreter, XLA, IREE's llvm-cpu, ONNX Runtime's CPU
provider), then the report's numerical robustness table from the store."""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

import background_runs
from backend_check import INSTALLED_IN_CI
from conftest import REPO, bakeoff
from bakeoff.results.report.robustness import grade
from bakeoff.workloads.traps import numerics_workloads

BACKENDS = sorted(INSTALLED_IN_CI)
RUN_TIMEOUT_S = 3000  # 108 cases, from the session's start; minutes on two idle cores, far longer on a loaded machine
# The whole run is this module's fixture: the first test's time limit must hold what is left of it.
pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 300)
F32_1E8 = 9.99999993922529e-09  # 1e-8 rounded to float32: what the reference sums


def background_run_args(work: Path) -> list[str]:
    """The run this module checks: started as the session begins, at low priority, on the CPU time the other
    tests leave idle (tests/background_runs.py), since it judges no timing."""
    shutil.copytree(REPO / "configs", work / "configs")
    # This suite is about the numbers: it asserts no timing figure, so one case's compile may run while another
    # times (`--gate timers_only`; on the CPU `auto` is exclusive, which tests/test_phases.py's smoke run keeps).
    args = ["run", "configs/numerics.yaml", "--preset", "smoke", "--device", "cpu", "--jobs", "2",
            "--gate", "timers_only", "--db", f"sqlite:///{work / 'n.db'}"]
    for b in BACKENDS:
        args += ["--backend", b]
    return args


@pytest.fixture(scope="module")
def suite_run() -> dict:
    work, stdout = background_runs.collect(__name__, RUN_TIMEOUT_S)
    db = f"sqlite:///{work / 'n.db'}"
    records = json.loads(bakeoff("export", "latest", "--format", "json", "--db", db, cwd=work, check=True).stdout)
    report = work / "r.html"
    bakeoff("report", records[0]["run_id"], "-o", str(report), "--cdn", "--db", db, cwd=work, check=True)
    return {"stdout": stdout, "records": records, "html": report.read_text()}


def _by(records, workload, backend=None, dtype=None):
    return [r for r in records if r["workload"] == workload and (backend is None or r["backend"] == backend)
            and (dtype is None or r["dtype"] == dtype)]


def test_every_trap_dtype_and_backend_has_a_record(suite_run):
    records = suite_run["records"]
    assert {r["workload"] for r in records} == set(numerics_workloads())
    assert {r["backend"] for r in records} == set(BACKENDS)
    assert len(records) == 18 * len(BACKENDS)  # 18 (trap, dtype) pairs in configs/numerics.yaml
    for r in records:
        assert r["status"] in ("ok", "mismatch", "skipped"), (r["case_id"], r["status"], r.get("reason"))
        if r["status"] == "skipped":
            assert r["reason"] and r["backend"] != "eager"
            continue
        assert r["worst_elem_index"] is not None and r["worst_elem_seed"] in (0, 1), r["case_id"]
        assert r["checked_seeds"] == [0, 1]
        assert r["gate_policy"] == "timers_only", r["case_id"]  # the command line's, as asked
        assert set(r["inputs"]) == {n.attr("name") for n in numerics_workloads()[r["workload"]].graph.inputs}


def test_eager_passes_every_trap_and_is_its_own_yardstick(suite_run):
    for r in (x for x in suite_run["records"] if x["backend"] == "eager"):
        assert r["status"] == "ok" and r["err_ratio_vs_eager"] == 1.0, r["case_id"]


def test_absorption_result_is_one_of_the_two_float32_neighbours(suite_run):
    # Any summation order rounds to 1.0 or 1.0000001; the float64 answer of the rounded inputs is 1 + 7 x fl(1e-8).
    for r in _by(suite_run["records"], "sum_absorption"):
        if r["status"] == "skipped":
            continue
        assert r["status"] == "ok", (r["backend"], r["reason"])
        assert r["worst_elem_ref"] == pytest.approx(1 + 7 * F32_1E8, rel=1e-15)
        assert r["worst_elem_value"] in (1.0, 1.0000001192092896), (r["backend"], r["worst_elem_value"])
        assert r["inputs"]["x"] == "values [1] (1 given, padded with 1e-08)"


def test_absorption_at_large_n_reference_and_eager(suite_run):
    (eager,) = _by(suite_run["records"], "sum_absorption_large", "eager")
    assert eager["worst_elem_ref"] == pytest.approx(1 + 65535 * F32_1E8, rel=1e-15)
    assert abs(eager["worst_elem_value"] - eager["worst_elem_ref"]) < 1e-5  # a blocked sum, not a running one
    for r in _by(suite_run["records"], "sum_absorption_large"):
        if r["status"] == "ok":  # the verdict agrees with the value: a running float32 sum (1.0) cannot pass
            assert r["worst_elem_value"] != 1.0, r["backend"]


def test_softmax_with_equal_large_logits_is_one_over_n(suite_run):
    for r in _by(suite_run["records"], "softmax_equal_large"):
        if r["status"] == "skipped":
            continue
        assert r["status"] == "ok", (r["backend"], r["dtype"], r["reason"])
        assert r["worst_elem_ref"] == pytest.approx(1 / 300, rel=1e-15)
        assert isinstance(r["worst_elem_value"], float) and math.isfinite(r["worst_elem_value"])
        assert r["worst_elem_value"] == pytest.approx(1 / 300, rel={"float32": 1e-6}.get(r["dtype"], 1e-2))


def test_no_backend_overflows_softmax(suite_run):
    for r in _by(suite_run["records"], "softmax_huge_logits"):
        assert r["status"] in ("ok", "skipped"), (r["backend"], r["dtype"], r["reason"])


def test_the_same_inputs_reach_every_backend(suite_run):
    # The worst element's float64 value depends only on the inputs: where two backends report the same index
    # for the same trap, dtype and seed, they must report the same reference there.
    seen: dict[tuple, float] = {}
    for r in suite_run["records"]:
        if r["status"] == "skipped" or not isinstance(r["worst_elem_ref"], float):
            continue
        key = (r["workload"], r["dtype"], r["worst_elem_seed"], r["worst_elem_output"], tuple(r["worst_elem_index"]))
        assert seen.setdefault(key, r["worst_elem_ref"]) == r["worst_elem_ref"], key


def _table(html: str) -> list[list[str]]:
    table = re.search(r'<table id="robustness".*?</table>', html, re.S)
    assert table, "no robustness table in the report"
    cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>",
                                                                                      table.group(0), re.S)]
    return [[" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in row] for row in cells]


def test_report_robustness_table_grades_each_record(suite_run):
    rows = _table(suite_run["html"])
    header, body = rows[0], rows[1:]
    assert header[:2] == ["trap", "dtype"] and sorted(header[2:]) == BACKENDS
    assert len(body) == 18
    records = {(r["workload"], r["dtype"], r["backend"]): r for r in suite_run["records"]}
    for row in body:
        workload, dtype = row[0].split()[0], row[1]
        for backend, cell in zip(header[2:], row[2:]):
            r = records[(workload, dtype, backend)]
            assert cell.startswith(grade(r)), (workload, dtype, backend, cell)
            if r["status"] != "skipped":
                assert f"worst {r['worst_elem_index']}" in cell
    assert "Expected:" in suite_run["html"]


def test_a_bad_input_file_is_exit_2_and_writes_nothing(tmp_path):
    (tmp_path / "x.npy").write_bytes(b"not an array")
    (tmp_path / "bad.yaml").write_text("device: cpu\nworkloads:\n  - name: softmax\n    init:\n"
                                       "      x: {file: x.npy}\nbackends: [eager]\n")
    proc = bakeoff("run", "bad.yaml", "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "bad.yaml:5: workloads.0.init.x.file" in proc.stderr, proc.stderr
    assert "not a readable .npy" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml", "x.npy"]
