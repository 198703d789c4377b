"""Kernels that differ only in names run one compiled kernel: a transformer's Q, K and V projections generate the
same matmul three times (same shapes, strides and epilogue; other buffer names), and each would otherwise be
imported, compiled and cached as a function of its own (about a second of cold compile each for a tensor-core
kernel). `shared_kernels` gives each such kernel a copy that calls the first one's functions with its own
buffers; the generated sources themselves (the artifacts a user reads) keep their names.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Sequence

from bakeoff.backends.tritongen.source import KernelSource


def _plane_names(src: KernelSource) -> list[str]:
    return [name for name, _ in src.split["planes"]] if src.split else []


def canonical(src: KernelSource) -> str:
    """`src.text` with its function names, pointer parameters (buffers, operand planes) and node-named locals
    replaced by positional names: equal for two kernels that compute the same thing on different buffers."""
    names = list(src.params) + _plane_names(src)
    text = re.sub(rf"\b{re.escape(src.fn)}", "KERNEL", src.text)
    for i, name in sorted(enumerate(names), key=lambda p: -len(p[1])):  # longest first: no name inside another
        text = re.sub(rf"\b{re.escape(name)}\b", f"_P{i}_", text)
    seen: dict[str, str] = {}  # locals named after graph nodes (v15, s16_desc): numbered by first appearance
    return re.sub(r"\b([vs])(\d+)(?=\b|_desc\b)",
                  lambda m: seen.setdefault(m.group(0), f"{m.group(1)}_{len(seen)}_"), text)


def shared_kernels(sources: Sequence[KernelSource]) -> list[KernelSource]:
    """`sources` with each kernel that equals an earlier one up to names (`canonical`) replaced by a copy that
    calls the earlier one's functions (its `fn`, `text` and split launches) on its own buffers and planes."""
    first: dict[tuple, KernelSource] = {}
    out = []
    for src in sources:
        key = (canonical(src), len(src.params), tuple(sorted(src.runtime.items())))
        twin = first.setdefault(key, src)
        out.append(src if twin is src else _calling(twin, src))
    return out


def _calling(twin: KernelSource, src: KernelSource) -> KernelSource:
    """`src` running `twin`'s functions: the twin's names mapped to `src`'s buffers and planes by position."""
    rename = dict(zip(list(twin.params) + _plane_names(twin), list(src.params) + _plane_names(src)))
    split = None
    if src.split:
        split = {**src.split, "launches": [(fn, grid, tuple(rename[p] for p in params))
                                           for fn, grid, params in twin.split["launches"]]}
    return dataclasses.replace(src, fn=twin.fn, text=twin.text, split=split)
