"""Export a run's records as JSON (a list of objects, one per case), CSV or Parquet (pandas).

The columns are the record model's (results/stored_record.py: StoredRecord.export_columns), in its order, for every
record alike (None where a field was not measured), followed by any fields an older or newer bakeoff wrote
that this one does not know (`legacy_fields`).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

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
    frame = pd.DataFrame([{c: json.dumps(row.get(c)) if isinstance(row.get(c), dict | list) else row.get(c)
                           for c in columns} for row in rows], columns=columns)
    if fmt == "csv":
        if output is None:
            return frame.to_csv(index=False)
        frame.to_csv(output, index=False)
        return None
    if output is None:
        raise ValueError("parquet is binary: it needs an output file")
    frame.to_parquet(output, index=False)
    return None
