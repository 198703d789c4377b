"""A record as read back from the store (`StoredRecord`): the record model (results/record.py) with the keys
the store adds, read without ever failing on what an older or newer bakeoff wrote."""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, ValidationError

from bakeoff.results.record import CaseRecord, InTable, doc
from bakeoff.results.record_parts import column_of
from bakeoff.results.renamed_fields import current_names


class StoredRecord(CaseRecord):
    """A record read back from the store, with the keys the store adds. Its status is any text: a newer
    bakeoff's status reads as written."""

    status: Annotated[str, InTable(16)] = Field(description="as written (see CaseRecord.status)")
    run_id: str | None = doc("the run it belongs to")
    id: int | None = doc("the store's row id (insertion order)")
    created_at: dt.datetime | None = doc("when the record was committed (UTC)")

    @classmethod
    def export_columns(cls) -> list[str]:
        return ["run_id", "id", "created_at", *super().export_columns()]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> StoredRecord:
        """A record from a row of `records` (columns, and `details` holding the rest). Never raises for
        what an older or newer bakeoff wrote: an unknown field, or a value of another type, is kept in
        `legacy_fields` instead of failing the read. A field an older bakeoff wrote under another name reads
        under its current one (results/renamed_fields.py)."""
        row = current_names(row)
        data = {k: v for k, v in row.items() if k != "details" and v is not None}
        for key, value in (row.get("details") or {}).items():
            if value is not None:
                data.setdefault(key, value)
        known = set(cls.export_columns())
        legacy = {k: data.pop(k) for k in list(data) if k not in known or k == "legacy_fields"}
        data.setdefault("status", "crash")  # no stored record lacks one; a corrupt row still reads
        for _ in range(len(data) + 1):
            try:
                return cls(**data, legacy_fields=_jsonable(legacy) or None)
            except ValidationError as exc:
                bad = {column_of(cls, err["loc"]).split(".")[0] for err in exc.errors() if err["loc"]}
                bad.discard("legacy_fields")
                if not bad & set(data):
                    raise
                for name in bad & set(data):
                    legacy[name] = data.pop(name)
                data.setdefault("status", "crash")
        raise AssertionError("unreachable")


def _jsonable(value: Any) -> Any:
    """`value` with anything JSON cannot hold (a datetime from a column) turned into text, for legacy_fields."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)
