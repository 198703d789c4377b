"""Artifacts are written to a staging folder and moved into place only after their record commits.

A case's worker writes its artifacts (kernel sources, IR dumps) under `WORK/staging/SLUG`; the orchestrator
commits the record, then renames that folder to `WORK/artifacts/SLUG` (one rename on one filesystem). So
`artifacts/` only ever holds complete folders of committed cases. After a crash, `recover` finishes the
renames of committed cases and deletes the staging folders of cases that have no record.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from bakeoff.harness.plan.cases import Case

MAX_PACKED_BYTES = 256 * 2**20  # artifacts shipped back from a remote worker, in bytes


def case_slug(case_id: str) -> str:
    """A folder name for a case: its id made filesystem-safe, plus a hash so that two ids never collide."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in case_id)[:180]
    return f"{safe}-{hashlib.sha1(case_id.encode()).hexdigest()[:8]}"


def staging_dir(work_dir: Path, case: Case) -> Path:
    return work_dir / "staging" / case_slug(case.case_id)


def final_dir(work_dir: Path, case: Case) -> Path:
    return work_dir / "artifacts" / case_slug(case.case_id)


def publish(work_dir: Path, case: Case) -> None:
    """Move a committed case's staged artifacts into place (nothing to do when it staged none)."""
    staged, final = staging_dir(work_dir, case), final_dir(work_dir, case)
    if not staged.exists():
        return
    if final.exists():  # only a half-finished earlier publish of this same committed record leaves one
        shutil.rmtree(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, final)


def discard(work_dir: Path, case: Case) -> None:
    """Delete what a case staged (its worker was killed or its record was refused)."""
    shutil.rmtree(staging_dir(work_dir, case), ignore_errors=True)


def recover(work_dir: Path, cases: list[Case], done: set[str]) -> None:
    """After an interruption: publish the staged artifacts of committed cases, delete the others."""
    for case in cases:
        if case.case_id in done:
            publish(work_dir, case)
        else:
            discard(work_dir, case)
    drop_empty_staging(work_dir)


def drop_empty_staging(work_dir: Path) -> None:
    """At a session's end: remove the run's `staging/` folder when no case left anything in it."""
    try:
        (work_dir / "staging").rmdir()
    except OSError:  # absent, or holding what a case staged
        pass


def pack(folder: Path) -> dict[str, bytes]:
    """The files under `folder` (relative path -> bytes), to ship back from a remote worker."""
    files, total = {}, 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []:
        data = path.read_bytes()
        total += len(data)
        if total > MAX_PACKED_BYTES:
            raise ValueError(f"artifacts under {folder} exceed {MAX_PACKED_BYTES} bytes")
        files[str(path.relative_to(folder))] = data
    return files


def unpack(files: dict[str, bytes], folder: Path) -> None:
    """Write `files` (from `pack`) under `folder`, refusing paths that would leave it."""
    root = folder.resolve()
    for name, data in files.items():
        target = (folder / name).resolve()
        if root not in target.parents:
            raise ValueError(f"artifact path {name!r} leaves {folder}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
