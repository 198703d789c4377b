"""Workloads written as expressions, e.g. ``silu(x @ w1) * (x @ w3)``, parsed safely into a Graph.

Parsed with Python's `ast` and walked against a whitelist: names are declared inputs or op names, calls
take inputs positionally and attributes as keyword constants, numbers become constants. Nothing is ever
evaluated: no attribute access, subscripts, lambdas, comprehensions or builtins.
"""
from __future__ import annotations

import ast
import math
from typing import Any, Mapping

from bakeoff.workloads import ops
from bakeoff.workloads.builder import GraphBuilder
from bakeoff.workloads.ir import Graph, IRError

MAX_EXPR_CHARS = 4000
MAX_NODES = 500
# Nesting of operators and calls. The walk below recurses per level, so a deeper expression (`x+x+...+x`
# two thousand times) would exhaust Python's recursion limit instead of failing with a clear message.
MAX_DEPTH = 100

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul"}
# Convenience spellings accepted in expressions.
_ALIASES = {"gelu_tanh": ("gelu", {"approximate": "tanh"}), "attention": ("sdpa", {})}


class ExprError(ValueError):
    """A bad expression; `token` is the offending piece of text, `col` its 0-based column."""

    def __init__(self, message: str, token: str = "", col: int | None = None) -> None:
        self.token, self.col = token, col
        shown = token if len(token) <= 60 else token[:59] + "…"   # the offending text may be 4000 characters
        super().__init__(f"{message}" + (f" (at {shown!r})" if token else ""))


def _number(value: Any, text: str, node: ast.AST) -> float:
    """A numeric literal as a finite float (1e400 and 10**400-digit integers are refused)."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ExprError("numeric constants must be finite", _seg(text, node), getattr(node, "col_offset", None))
    return number


def _const_value(node: ast.AST, text: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | bool):
        if isinstance(node.value, float):
            _number(node.value, text, node)
        return node.value
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, int | float) and not isinstance(node.operand.value, bool)):
        return -node.operand.value
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_const_value(e, text) for e in node.elts)
    raise ExprError("attribute values must be constants", _seg(text, node), getattr(node, "col_offset", None))


def _seg(text: str, node: ast.AST) -> str:
    return ast.get_source_segment(text, node) or type(node).__name__


class _Parser:
    def __init__(self, text: str, inputs: Mapping[str, list], name: str) -> None:
        self.text = text
        self.b = GraphBuilder(name)
        self.names: dict[str, int] = {}
        for input_name, shape in inputs.items():
            if input_name in ops.ALL_OPS or input_name in _ALIASES:
                raise ExprError(f"input name {input_name!r} shadows an op", input_name)
            try:
                self.names[input_name] = self.b.input(input_name, tuple(shape))
            except IRError as exc:
                raise ExprError(str(exc), input_name) from None
        self.count = 0

    def fail(self, message: str, node: ast.AST) -> ExprError:
        return ExprError(message, _seg(self.text, node), getattr(node, "col_offset", None))

    def visit(self, node: ast.AST) -> int:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(f"expression has more than {MAX_NODES} nodes", node)
        try:
            return self._visit(node)
        except IRError as exc:
            raise self.fail(str(exc), node) from None

    def _visit(self, node: ast.AST) -> int:
        if isinstance(node, ast.Name):
            if node.id not in self.names:
                raise self.fail(f"unknown name {node.id!r}; inputs are {sorted(self.names)}", node)
            return self.names[node.id]
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise self.fail("only numeric constants are allowed", node)
            return self.b.const(_number(node.value, self.text, node))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return self.b.neg(self.visit(node.operand))
            if isinstance(node.op, ast.UAdd):
                return self.visit(node.operand)
            raise self.fail("unsupported unary operator", node)
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Pow):
                exponent = node.right
                if not isinstance(exponent, ast.Constant) or not isinstance(exponent.value, int | float):
                    raise self.fail("the exponent of ** must be a number", exponent)
                return self.b.pow(self.visit(node.left), exponent=_number(exponent.value, self.text, exponent))
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self.fail("unsupported operator", node)
            return self.b.emit(op, [self.visit(node.left), self.visit(node.right)])
        if isinstance(node, ast.Call):
            return self._call(node)
        raise self.fail(f"{type(node).__name__} is not allowed in expressions", node)

    def _call(self, node: ast.Call) -> int:
        if not isinstance(node.func, ast.Name):
            raise self.fail("only plain op names can be called", node.func)
        fname = node.func.id
        op, attrs = _ALIASES.get(fname, (fname, {}))
        if op not in ops.ALL_OPS or op in ops.SOURCES:
            raise self.fail(f"unknown function {fname!r}; ops: {', '.join(ops.ALL_OPS[2:])}", node.func)
        attrs = dict(attrs)
        for kw in node.keywords:
            if kw.arg is None:
                raise self.fail("**kwargs are not allowed", node)
            attrs[kw.arg] = _const_value(kw.value, self.text)
        args = [self.visit(a) for a in node.args]
        return self.b.emit(op, args, **attrs)


def _check_depth(tree: ast.AST) -> None:
    """Refuse trees nested deeper than MAX_DEPTH, walking them without recursion."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExprError(f"expression nested deeper than {MAX_DEPTH} levels")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node)
                     if not isinstance(child, ast.operator | ast.unaryop | ast.expr_context))


def parse_expr(text: str, inputs: Mapping[str, list], name: str = "expr") -> Graph:
    """Build a Graph from `text` over `inputs` (name -> symbolic shape). Raises ExprError with the token."""
    if len(text) > MAX_EXPR_CHARS:
        raise ExprError(f"expression longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"syntax error: {exc.msg}", (exc.text or "").strip(), exc.offset) from None
    except (RecursionError, MemoryError):  # Python's own parser gives up on very deep nesting
        raise ExprError(f"expression nested deeper than {MAX_DEPTH} levels") from None
    _check_depth(tree.body)
    parser = _Parser(text.strip(), inputs, name)
    out = parser.visit(tree.body)
    return parser.b.finish([out])
