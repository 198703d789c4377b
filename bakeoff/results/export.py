"""Export a run's records as JSON (a list of objects, one per case), CSV or Parquet (pandas).

The columns are the record model's (results/stored_record.py: StoredRecord.export_columns), in its order, for every
record alike (None where a field was not measured), followed by any fields an older or newer bakeoff wrote
that this one does not know (`legacy_fields`). Tabular formats hold scalars: nested values (samples, dicts) are
JSON text. A Parquet column has one type: a float field whose non-finite values the record writes as the words
"nan", "inf" and "-inf" (the worst element's) is a float column holding them as IEEE values, and a column whose
values are of several kinds (a legacy field) holds each as JSON text. Each Parquet column carries its field's
description (units included) as the metadata key `description`.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, get_args

import pandas as pd

from bakeoff.results.record_parts import NonFinite
from bakeoff.results.stored_record import StoredRecord


def typed(record: StoredRecord | Mapping[str, Any]) -> StoredRecord:
    """A record as the model, from a row of Store.records (columns and `details`) or as is."""
    return record if isinstance(record, StoredRecord) else StoredRecord.from_row(record)


def flatten(record: StoredRecord | Mapping[str, Any]) -> dict[str, Any]:
    """One flat object: every model field in export order, then the record's legacy fields."""
    return typed(record).flat()


def export_columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The model's columns, then the legacy fields of `rows` in the order first seen."""
    columns = StoredRecord.export_columns()
    known = set(columns)
    for row in rows:
        for key in row:
            if key not in known:
                known.add(key)
                columns.append(key)
    return columns


def export_records(records: Iterable[StoredRecord | Mapping[str, Any]], fmt: str, output: Path | None) -> str | None:
    """Write `records` to `output` in `fmt` (json, csv, parquet); returns the JSON or CSV text when no output
    file is given (parquet needs one: ValueError)."""
    rows = [flatten(r) for r in records]
    columns = export_columns(rows)
    if fmt == "json":
        text = json.dumps([{c: row.get(c) for c in columns} for row in rows], indent=1)
        if output is None:
            return text
        output.write_text(text + "\n")
        return None
    # Tabular formats hold scalars: nested values (samples, dicts) are kept as JSON text.
    cells = {c: [json.dumps(row.get(c)) if isinstance(row.get(c), dict | list) else row.get(c) for row in rows]
             for c in columns}
    if fmt == "csv":
        frame = pd.DataFrame(cells, columns=columns)
        if output is None:
            return frame.to_csv(index=False)
        frame.to_csv(output, index=False)
        return None
    if output is None:
        raise ValueError("parquet is binary: it needs an output file")
    write_parquet(cells, output)
    return None


@functools.cache
def _descriptions() -> dict[str, str]:
    """Column -> its record field's description."""
    return {c.name: c.description or "" for c in StoredRecord.declared_columns()}


@functools.cache
def _float_or_word_columns() -> frozenset[str]:
    """The columns of float fields that write non-finite values as words (`float | NonFinite`)."""
    return frozenset(c.name for c in StoredRecord.declared_columns() if NonFinite in get_args(c.annotation))


def _one_type(name: str, values: list[Any]) -> list[Any]:
    """A column's values as one Parquet type (None stays null): a float field's words as floats; values of
    several kinds (text beside numbers, booleans beside numbers) as JSON text."""
    if name in _float_or_word_columns():
        return [float(v) if isinstance(v, str) else v for v in values]
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) > 1 and not kinds <= {int, float}:
        return [None if v is None else json.dumps(v) for v in values]
    return values


def write_parquet(cells: Mapping[str, list[Any]], output: Path) -> None:
    """Columns (name -> values, None where not measured, nested values as JSON text) as a Parquet file, each
    column of one type (a NaN stays a NaN, apart from a null) and carrying its field's description."""
    import pyarrow as pa   # the `export` extra
    import pyarrow.parquet as pq

    unknown = "a field this bakeoff does not know (an older or newer bakeoff wrote it)"
    arrays = [pa.array(_one_type(name, values), from_pandas=False) for name, values in cells.items()]
    fields = [pa.field(name, array.type, metadata={"description": _descriptions().get(name) or unknown})
              for name, array in zip(cells, arrays)]
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    if not Path(output).parent.is_dir():   # as pandas says it for csv
        raise OSError(f"Cannot save file into a non-existent directory: '{Path(output).parent}'")
    with open(output, "wb") as file:   # an OSError with its strerror, not pyarrow's own text
        pq.write_table(table, file)
