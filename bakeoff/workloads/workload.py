"""A built-in workload: a named graph with symbolic dims, the presets that bind them, and what it is for."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from bakeoff.workloads.ir import Graph


@dataclass(frozen=True)
class Workload:
    """A named graph with symbolic dims and the presets that bind them. Workloads of the numerics suite
    also say which numerical `trap` they open and the `expected` behaviour of a sound backend."""

    name: str
    category: str
    description: str
    graph: Graph
    presets: Mapping[str, Mapping[str, int]]
    trap: str = ""
    expected: str = ""
