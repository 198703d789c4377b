"""Workload definitions: the IR, its builder and passes, the built-in suite, lowerings and the fp64 reference."""
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import DTYPES, Graph, IRError, Node, bind

__all__ = ["DTYPES", "Graph", "GraphBuilder", "IRError", "Node", "bind"]
