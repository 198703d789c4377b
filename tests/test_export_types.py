"""`bakeoff export --format parquet` writes every run it reads: one type per column, and says what each column is.

A run whose worst element was infinite in one case and finite in another (an inline `x / 0` beside a softmax)
once ended the export with pyarrow's ArrowTypeError, a traceback and exit 1.
"""
import json
import math

import pyarrow.parquet as pq
import pytest

from bakeoff.results.export import export_records

ROWS = [
    {"run_id": "r", "case_id": "a", "status": "ok", "worst_elem_value": "-inf", "latency_ms_median": 1.5,
     "details": {"field_from_a_newer_bakeoff": "fast"}},
    {"run_id": "r", "case_id": "b", "status": "ok", "worst_elem_value": 0.25, "latency_ms_median": None,
     "details": {"field_from_a_newer_bakeoff": 3}},
    {"run_id": "r", "case_id": "c", "status": "ok", "worst_elem_value": "nan", "samples_ms": [1.0, 2.0]},
]


def test_parquet_holds_non_finite_words_as_floats_and_mixed_legacy_values_as_json(tmp_path):
    out = tmp_path / "r.parquet"
    export_records(ROWS, "parquet", out)
    table = pq.read_table(out)
    value = table.column("worst_elem_value").to_pylist()
    assert str(table.schema.field("worst_elem_value").type) == "double"
    assert value[0] == -math.inf and value[1] == 0.25 and math.isnan(value[2])   # "nan" stays NaN, not null
    assert table.column("latency_ms_median").to_pylist() == [1.5, None, None]
    assert table.column("field_from_a_newer_bakeoff").to_pylist() == ['"fast"', "3", None]
    assert json.loads(table.column("samples_ms").to_pylist()[2]) == [1.0, 2.0]


def test_parquet_columns_carry_their_descriptions_with_units(tmp_path):
    out = tmp_path / "r.parquet"
    export_records(ROWS, "parquet", out)
    schema = pq.read_schema(out)
    described = {f.name: (f.metadata or {}).get(b"description", b"").decode() for f in schema}
    assert "ms per call" in described["samples_ms"] and "median ms" in described["latency_ms_median"]
    assert "does not know" in described["field_from_a_newer_bakeoff"]
    assert all(described.values()), [name for name, text in described.items() if not text]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_text_formats_keep_the_words(tmp_path, fmt):
    out = tmp_path / f"r.{fmt}"
    export_records(ROWS, fmt, out)
    text = out.read_text()
    assert "-inf" in text and "nan" in text
