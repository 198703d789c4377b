"""Workload definitions: the IR, its builder and passes, the built-in suite, lowerings and the fp64 reference."""
from .builder import GraphBuilder
from .ir import DTYPES, Graph, IRError, Node, bind

__all__ = ["DTYPES", "Graph", "GraphBuilder", "IRError", "Node", "bind"]
