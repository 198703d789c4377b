"""The report's numerical robustness table on made-up records: the grade of each cell, its figures, the
rows (traps x dtype) and columns (backends), and the worst-element function it shows."""
from __future__ import annotations

import math
import re

import torch

from bakeoff.harness.measure.worst_element import tolerance_ratio, worst_element
from bakeoff.results.report.data import RunData
from bakeoff.results.report.robustness import grade, robustness_section


def _case(workload="sum_absorption", backend="inductor", dtype="float32", status="ok", ratio=1.0, rel=7e-8, **kw):
    return {"workload": workload, "shape": "M=3,N=8", "dtype": dtype, "backend": backend, "status": status,
            "err_ratio_vs_eager": ratio, "err_rel_l2_vs_fp64": rel, **kw}


def test_grades():
    assert grade(_case()) == "passed"
    assert grade(_case(ratio=0.5)) == "passed"  # more accurate than eager
    assert grade(_case(ratio=1.4, rel=7e-8)) == "worse than eager"  # 7e-8 is above float32's unit roundoff
    assert grade(_case(ratio=1.4, rel=5e-8)) == "passed"  # rounding level (below 2**-24): not told apart
    assert grade(_case(ratio=1.09, rel=1e-3)) == "passed"  # within WORSE_RATIO
    assert grade(_case(status="mismatch", ratio=100.0)) == "failed"
    assert grade(_case(status="crash", ratio=None, rel=None)) == "failed"
    assert grade(_case(status="skipped", ratio=None, rel=None)) == "skipped"
    assert grade(_case(dtype="bfloat16", ratio=2.0, rel=3e-3)) == "passed"  # below bfloat16's 2**-8
    assert grade(_case(dtype="bfloat16", ratio=2.0, rel=5e-3)) == "worse than eager"


def _rows(html: str) -> list[list[str]]:
    table = re.search(r'<table id="robustness".*?</table>', html, re.S).group(0)
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    cells = [re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S) for r in rows]
    return [[" ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in row] for row in cells]


def test_table_traps_as_rows_backends_as_columns():
    cases = [
        _case(backend="eager", ratio=1.0, rel=7e-8, worst_elem_index=[0, 0], worst_elem_value=1.0,
              worst_elem_ref=1.00000007, worst_elem_eager=1.0),
        _case(backend="xla", ratio=0.71, rel=5e-8, worst_elem_index=[2, 0], worst_elem_value=1.0000001192092896,
              worst_elem_ref=1.00000007, worst_elem_eager=1.0),
        _case(workload="sum_absorption_large", backend="tritongen", status="mismatch", ratio=520.0, rel=6.5e-4,
              reason="error vs fp64 beyond tolerance", worst_elem_index=[1, 0], worst_elem_value=1.0,
              worst_elem_ref=1.00065535, worst_elem_eager=1.0006541),
        _case(workload="layernorm_shifted", backend="eager", rel=5e-4, err_within_tol_vs_fp64=False),
        _case(workload="softmax_equal_large", backend="xla", dtype="float16", status="skipped", ratio=None, rel=None,
              reason="xla does not support float16 here"),
        _case(workload="softmax_equal_large", backend="xla", dtype="float32"),
        _case(workload="softmax", backend="xla"),  # not a trap: not in the table
    ]
    html = robustness_section([RunData({"run_id": "r1"}, cases)])
    assert html.startswith("<h2>Numerical robustness</h2>")
    rows = _rows(html)
    assert rows[0] == ["trap", "dtype", "eager", "tritongen", "xla"]  # eager first, then by name
    names = [(r[0].split()[0], r[1]) for r in rows[1:]]
    assert names == [("sum_absorption", "float32"), ("sum_absorption_large", "float32"),
                     ("layernorm_shifted", "float32"), ("softmax_equal_large", "float32"),
                     ("softmax_equal_large", "float16")]  # suite order, then float32, float16, bfloat16
    absorption = rows[1]
    assert absorption[2].startswith("passed") and "worst [0, 0]: 1 vs fp64 1.00000007 (eager 1)" in absorption[2]
    assert absorption[4].startswith("passed") and "0.71× eager" in absorption[4]
    assert "1.00000012" in absorption[4] and absorption[3] == "-"
    large = rows[2]
    assert large[3].startswith("failed") and "520× eager" in large[3] and "beyond tolerance" in large[3]
    assert "outside assert_close tolerance" in rows[3][2]
    assert rows[5][4].startswith("skipped") and "does not support float16" in rows[5][4]
    assert rows[5][3] == "-" and rows[4][4].startswith("passed")
    assert "softmax" not in [n for n, _ in names]
    assert "Expected:" in html and "1.00000007" in html  # the traps' descriptions follow the table


def test_no_trap_no_section():
    assert robustness_section([RunData({"run_id": "r1"}, [_case(workload="softmax")])]) == ""


def test_worst_element_is_the_one_furthest_outside_tolerance():
    ref = torch.tensor([[1.0, 100.0], [1e-6, 5.0]], dtype=torch.float64)
    out = torch.tensor([[1.0, 100.001], [2e-6, 5.0]], dtype=torch.float32)
    # |diff| / (1e-5 + 1.3e-6 |ref|): 100.001 is off by 1e-3 (ratio 7.6), 2e-6 by 1e-6 (ratio 0.1)
    w = worst_element(out, ref, out)
    assert w.index == (0, 1) and w.value == float(out[0, 1]) and w.reference == 100.0
    assert w.tol_ratio == float(tolerance_ratio(out, ref).max()) and 7 < w.tol_ratio < 8
    assert w.as_dict(output=1, seed=3)["worst_elem_output"] == 1


def test_worst_element_non_finite():
    ref = torch.tensor([1.0, math.inf, math.nan, 2.0], dtype=torch.float64)
    agree = torch.tensor([1.0, math.inf, math.nan, 2.0])
    assert worst_element(agree, ref).tol_ratio == 0 and worst_element(agree, ref).index == (0,)
    nan_out = torch.tensor([1.0, math.inf, math.nan, math.nan])
    w = worst_element(nan_out, ref)
    assert w.index == (3,) and math.isinf(w.tol_ratio)
    d = w.as_dict(0, 0)
    assert d["worst_elem_value"] == "nan" and d["worst_elem_ref"] == 2.0 and d["worst_elem_tol_ratio"] == "inf"
    flipped = torch.tensor([1.0, -math.inf, math.nan, 2.0])
    assert worst_element(flipped, ref).index == (1,)
