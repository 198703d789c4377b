"""A case's saved artifacts (generated code, IR, graph texts), read from the folder its record names.

The worker writes each text artifact a backend returns to a file in the case's folder (harness/worker/stages.py
`save_artifacts`); the record keeps the folder (`artifacts_dir`) and the sizes. The report reads them from
there: a report made on another machine says where they were instead.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_TEXT_BYTES = 8 * 2**20  # larger files are listed with their path, not embedded

# The most telling artifact of each backend first: what ran (generated code, optimized IR), then its inputs.
_FIRST = ("output_code.py", "hlo_optimized", "dispatches.mlir", "optimized_nodes.txt")
_KERNEL_FILE = re.compile(r"^(?P<stem>.+)\.(?P<ext>py|ttir|ttgir|llir|ptx|cubin|amdgcn)$")
_KERNEL_EXT = ("py", "ttir", "ttgir", "llir", "ptx", "amdgcn")
_INPUTS = ("nodes.txt", "stablehlo", "torch_code")
_LAST = ("partition.txt", "graph")


@dataclass(frozen=True)
class Artifact:
    """One saved file: its name, size, path, and its text (None when binary or over MAX_TEXT_BYTES, `note`
    then says why)."""

    name: str
    size_bytes: int
    path: str
    text: str | None
    note: str = ""


def _order(name: str) -> tuple:
    if name in _FIRST:
        return (0, _FIRST.index(name), "", 0)
    m = _KERNEL_FILE.match(name)
    if m and m.group("ext") in _KERNEL_EXT:  # one kernel's source, then its IRs, kernel after kernel
        return (1, 0, m.group("stem"), _KERNEL_EXT.index(m.group("ext")))
    if name in _INPUTS:
        return (2, _INPUTS.index(name), "", 0)
    if name in _LAST:
        return (4, _LAST.index(name), "", 0)
    return (3, 0, name, 0)


def _read(path: Path) -> Artifact:
    size = path.stat().st_size
    if size > MAX_TEXT_BYTES:
        return Artifact(path.name, size, str(path), None,
                        f"{size / 2**20:.1f} MiB: too large to embed (limit {MAX_TEXT_BYTES / 2**20:.0f} MiB); "
                        f"open {path}")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        return Artifact(path.name, size, str(path), None, f"binary ({size:,} bytes): {path}")
    return Artifact(path.name, size, str(path), text)


def case_artifacts(case: dict[str, Any]) -> tuple[list[Artifact], str]:
    """The artifacts of a (flattened) record, the most telling first, and a note when there are none."""
    folder = case.get("artifacts_dir")
    if not folder and case.get("status") == "skipped":
        return [], f"skipped: {case.get('reason') or 'no reason recorded'}"
    if not folder:
        status = case.get("status")
        return [], ("no artifacts: the case ended before they were saved (" + str(status) + ")"
                    if status not in ("ok", "mismatch") else "no artifacts recorded for this case")
    path = Path(str(folder))
    if not path.is_dir():
        saved = sorted(k.removesuffix("_bytes") for k in (case.get("artifacts") or {}) if k.endswith("_bytes"))
        return [], (f"artifacts folder not found on this machine: {path}"
                    + (f" (it held {', '.join(saved)})" if saved else ""))
    files = sorted((p for p in path.iterdir() if p.is_file()), key=lambda p: _order(p.name))
    return [_read(p) for p in files], "" if files else f"the artifacts folder is empty: {path}"
