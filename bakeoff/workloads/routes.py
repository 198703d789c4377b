"""The route each composite op of a graph takes into a framework, in words, for the record's `lowering`."""
from __future__ import annotations

from typing import Callable

from bakeoff.workloads.ir import Graph, Node


def routes_by_op(graph: Graph, route_of: Callable[[Node], str | None]) -> dict[str, str]:
    """{op: its routes} over the nodes for which `route_of` gives words (None: the op has no route worth
    naming); an op whose nodes take several routes gets them joined with '; ', in graph order."""
    out: dict[str, list[str]] = {}
    for n in graph.nodes:
        words = route_of(n)
        if words is not None and words not in out.setdefault(n.op, []):
            out[n.op].append(words)
    return {op: "; ".join(ws) for op, ws in out.items() if ws}
