"""Checks beyond the seeds, each of one seed's outputs: the executable a warm process loaded from the cache,
and one more call after the timed loop. A backend whose outputs go wrong with reuse, or a cached kernel that
is not the one compiled, must not pass on its first outputs alone. No torch here: the orchestrator folds the
warm check into the record."""
from __future__ import annotations

from typing import Any

# Phase name -> how the case's reason names it.
EXTRA_CHECKS = {"warm": "warm (cache-loaded) executable", "post_timing": "output after the timed loop"}


def extra_check_fields(check: Any, phase: str) -> dict[str, Any]:
    """The record fields of an extra check (a checks.SeedCheck): `{phase}_check` ('ok' or 'mismatch') and
    `{phase}_check_reason` (None when it passed)."""
    status = check.verdict.status if check.verdict else "mismatch"
    reason = check.verdict.reason if check.verdict else "no output checked"
    return {f"{phase}_check": status, f"{phase}_check_reason": reason}


def fold_extra_check(record: dict[str, Any], phase: str) -> None:
    """A passing case whose extra check `phase` failed becomes a mismatch with that check's reason."""
    if record.get(f"{phase}_check") == "mismatch" and record.get("status") == "ok":
        record["status"] = "mismatch"
        record["reason"] = f"{EXTRA_CHECKS[phase]}: {record.get(f'{phase}_check_reason')}"
