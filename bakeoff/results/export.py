"""Export a run's records as JSON (a list of objects, one per case), CSV or Parquet (pandas)."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pandas as pd


def flatten(record: dict[str, Any]) -> dict[str, Any]:
    """Columns first, then the fields kept in `details`, as one flat object."""
    out = {k: v for k, v in record.items() if k != "details"}
    for k, v in (record.get("details") or {}).items():
        out.setdefault(k, v)
    for k, v in out.items():
        if isinstance(v, dt.datetime):
            out[k] = v.isoformat()
    return out


def export_records(records: list[dict[str, Any]], fmt: str, output: Path | None) -> str | None:
    """Write `records` to `output` in `fmt`; returns the JSON or CSV text when no output file is given
    (parquet needs one: ValueError)."""
    rows = [flatten(r) for r in records]
    if fmt == "json":
        text = json.dumps(rows, indent=1, default=str)
        if output is None:
            return text
        output.write_text(text + "\n")
        return None
    # Tabular formats hold scalars: nested values (samples, dicts) are kept as JSON text.
    frame = pd.DataFrame([{k: json.dumps(v, default=str) if isinstance(v, dict | list) else v
                           for k, v in row.items()} for row in rows])
    if fmt == "csv":
        if output is None:
            return frame.to_csv(index=False)
        frame.to_csv(output, index=False)
    elif output is None:
        raise ValueError("parquet is binary: it needs an output file")
    else:
        frame.to_parquet(output, index=False)
    return None
