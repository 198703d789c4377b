"""Folders the harness makes for a case carry their owner in their name, so that what a killed process left
behind can be deleted later, and only that.

A case runs in a temporary folder (`bakeoff-case-*` in the system's temporary folder: the case file, the
worker's output, its TMPDIR) and fills cache folders (`cache-*` under the run's artifacts folder); a
pre-started worker waits in `bakeoff-spare-*` (supervise/prestart.py, its TMPDIR inside); a Ray task works in
`bakeoff-ray-*`. They are deleted when the case ends, but not when the process that made them is killed
with SIGKILL. Each name holds its maker's `ProcessId` tag; cleaning deletes a folder whose maker ran on
this machine and has ended. A folder made elsewhere (another host or container), or by a live process, or
named without a tag, is left alone.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bakeoff.owner import CASE_TMP_PREFIX, ProcessId, owned_prefix  # CASE_TMP_PREFIX, owned_prefix: re-exported

RAY_TMP_PREFIX = "bakeoff-ray-"
SPARE_TMP_PREFIX = "bakeoff-spare-"
# The folders bakeoff's processes make in the machine's temporary folder: cases', spare workers', Ray tasks'.
TMP_PREFIXES = (CASE_TMP_PREFIX, SPARE_TMP_PREFIX, RAY_TMP_PREFIX)
CACHE_PREFIX = "cache-"


def remove_dead(folder: Path, prefix: str) -> list[Path]:
    """Delete the folders `prefix`* directly under `folder` whose owner has ended; returns them."""
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for path in entries:
        owner = ProcessId.from_tag(path.name, prefix)
        if owner is None or owner.alive() is not False or not path.is_dir() or path.is_symlink():
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed


def clean_temporary() -> list[Path]:
    """Case, spare and Ray task folders left in this machine's temporary folder by dead processes."""
    tmp = Path(tempfile.gettempdir())
    return [path for prefix in TMP_PREFIXES for path in remove_dead(tmp, prefix)]


def clean_run_folders(artifacts_root: Path) -> list[Path]:
    """Cache folders left under each run's folder of `artifacts_root` by dead orchestrators."""
    removed = []
    for run_dir in sorted(artifacts_root.iterdir()) if artifacts_root.is_dir() else []:
        if run_dir.is_dir():
            removed += remove_dead(run_dir, CACHE_PREFIX)
    return removed
