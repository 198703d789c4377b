"""One colour per backend, the same in every chart of the report and of the dashboard.

The built-in backends have fixed colours; any other label (an option set such as `inductor-max`, a plugin)
gets one from a second palette by a hash of its name, so it keeps its colour from page to page; two such labels
whose hashes collide on one page take the next free colours, in name order. Red is kept for failures,
breaches and tolerances."""
from __future__ import annotations

import zlib
from typing import Iterable

FIXED = {"eager": "#7f7f7f", "inductor": "#ff7f0e", "tritongen": "#2ca02c", "xla": "#1f77b4", "iree": "#9467bd",
         "onnxruntime": "#8c564b", "tensorrt": "#17becf"}
EXTRA = ("#e377c2", "#bcbd22", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#393b79", "#637939",
         "#8c6d31", "#fc8d62", "#8da0cb", "#e6ab02", "#a6cee3", "#b15928", "#6a3d9a")
FAILURE_RED = "#d62728"
# Several runs in one chart: the same backend colour, told apart by bar pattern and marker symbol.
RUN_PATTERNS = ("", "/", "x", ".", "\\", "+", "-", "|")
RUN_SYMBOLS = ("circle", "diamond", "square", "triangle-up", "cross", "star", "hexagon", "pentagon")


def backend_colors(labels: Iterable[str]) -> dict[str, str]:
    """A colour per backend label."""
    labels = list(labels)
    out: dict[str, str] = {}
    used: set[str] = set()
    for label in dict.fromkeys(labels):
        if label in FIXED:
            out[label] = FIXED[label]
            used.add(FIXED[label])
    for label in sorted(set(labels) - set(out)):
        start = zlib.crc32(label.encode()) % len(EXTRA)
        pick = next((EXTRA[(start + k) % len(EXTRA)] for k in range(len(EXTRA))
                     if EXTRA[(start + k) % len(EXTRA)] not in used), EXTRA[start])
        out[label] = pick
        used.add(pick)
    return out

