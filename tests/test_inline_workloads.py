"""docs/WORKLOADS.md, "Inline workloads": the op table a user writes expressions from is the op set the parser
takes (every op, its inputs and attributes), and the section's examples parse."""
import re
from pathlib import Path

import pytest

from bakeoff.workloads import ops
from bakeoff.workloads.expr import ExprError, parse_expr

DOC = Path(__file__).resolve().parents[1] / "docs" / "WORKLOADS.md"


def _section() -> str:
    text = DOC.read_text()
    start = text.index("## Inline workloads (`expr`)")
    return text[start:text.index("\n## ", start + 1)]


def _rows() -> dict[str, str]:
    """Op name -> its table row, for every op the first column names."""
    out = {}
    for line in _section().splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            out.update((name, line) for name in re.findall(r"`([a-z_]+)`", first))
    return out


def test_the_table_names_every_op_the_parser_takes():
    callable_ops = set(ops.ALL_OPS) - set(ops.SOURCES)
    assert set(_rows()) == callable_ops


@pytest.mark.parametrize("op", [op for op in ops.ATTRS if op not in ops.SOURCES])
def test_each_attribute_is_in_its_ops_row(op):
    row = _rows()[op]
    for name, default in ops.ATTRS[op].items():
        assert f"`{name}`" in row, (op, name)
        if default is None and name != "scale":
            assert "required" in row, (op, name)


def test_each_ops_arity_is_in_its_row():
    for op, row in _rows().items():
        arity = ops.ARITY[op]
        lo, hi = arity if isinstance(arity, tuple) else (arity, arity)
        cell = row.split("|")[2]
        assert str(lo) in cell and str(hi) in cell, (op, cell)


@pytest.mark.parametrize("example", ["gelu(x, approximate='tanh')", "sdpa(q, k, v, causal=True)",
                                     "reshape(x, shape=('B', 'S*D'))", "gelu_tanh(x)", "attention(q, k, v)"])
def test_the_sections_examples_parse(example):
    assert f"`{example}`" in _section()
    used = {name: ["B", "S", "D"] for name in ("x", "q", "k", "v") if re.search(rf"\b{name}\b", example)}
    assert parse_expr(example, used).outputs


def test_a_refused_attribute_value_names_the_rule():
    with pytest.raises(ExprError, match="var's correction must be an integer >= 0, got 0.5"):
        parse_expr("var(x, correction=0.5)", {"x": ["N"]})
