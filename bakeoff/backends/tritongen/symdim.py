"""A dim whose size is a runtime argument of the generated kernels: `SymDim`, an int that prints as an expression.

A shape sweep binds its swept dim to `SymDim(value, "dim_S")` (`bind_symbolic`); the stages run unchanged, and
wherever a template writes a size into the source (`f"{n}"`: masks, strides, loop bounds) it writes the
expression instead (`dim_S * 64`), which reads the kernel's runtime integer argument `dim_S`. Arithmetic on a
SymDim (+, -, *, //, %, unary -) is another SymDim, so strides and products stay expressions; everything else
(comparisons, `bit_length`, `float`, `int`, truthiness) sees the value, so a decision a template takes on a
size is taken for the value at hand. A source generated this way is therefore correct at that value; the
sweep server (`sweep.py`) reuses one only for values that generate the same text and sizes, so a decision that
changes with the value (a block size from the row length, int64 offsets, a mean's divisor) gives another
source instead of a wrong one.
"""
from __future__ import annotations

from typing import Any, Mapping

from bakeoff.workloads.ir import Graph, IRError, bind, norm_dim


class SymDim(int):
    """An int (its value at the point being served) with `expr`, the Triton/Python expression it prints as."""

    expr: str

    def __new__(cls, value: int, expr: str) -> "SymDim":
        out = super().__new__(cls, int(value))
        out.expr = expr
        return out

    def __str__(self) -> str:
        return self.expr

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return self.expr if not spec else format(int(self), spec)

    def _op(self, other: Any, sym: str, value: int, swap: bool = False) -> Any:
        if not isinstance(other, int) or isinstance(other, bool):
            return NotImplemented
        a, b = (str(other), self.expr) if swap else (self.expr, str(other))
        return SymDim(value, f"({a} {sym} {b})")

    def __add__(self, o: Any) -> Any:
        return self if o == 0 and not isinstance(o, SymDim) else self._op(o, "+", int(self) + int(o))

    def __radd__(self, o: Any) -> Any:
        return self if o == 0 else self._op(o, "+", int(o) + int(self), swap=True)

    def __sub__(self, o: Any) -> Any:
        return self if o == 0 and not isinstance(o, SymDim) else self._op(o, "-", int(self) - int(o))

    def __rsub__(self, o: Any) -> Any:
        return self._op(o, "-", int(o) - int(self), swap=True)

    def __mul__(self, o: Any) -> Any:
        return self if o == 1 and not isinstance(o, SymDim) else self._op(o, "*", int(self) * int(o))

    def __rmul__(self, o: Any) -> Any:
        return self if o == 1 else self._op(o, "*", int(o) * int(self), swap=True)

    def __floordiv__(self, o: Any) -> Any:
        return self if o == 1 and not isinstance(o, SymDim) else self._op(o, "//", int(self) // int(o))

    def __rfloordiv__(self, o: Any) -> Any:
        return self._op(o, "//", int(o) // int(self), swap=True)

    def __mod__(self, o: Any) -> Any:
        return self._op(o, "%", int(self) % int(o))

    def __rmod__(self, o: Any) -> Any:
        return self._op(o, "%", int(o) % int(self), swap=True)

    def __neg__(self) -> "SymDim":
        return SymDim(-int(self), f"(-{self.expr})")

    def __pos__(self) -> "SymDim":
        return self


def dims(shape: Any) -> tuple[int, ...]:
    """`shape` as ints, keeping SymDims (what `tuple(int(d) for d in shape)` did for a bound graph)."""
    return tuple(d if isinstance(d, int) else int(d) for d in shape)


def arg_name(dim: str) -> str:
    """The kernels' runtime argument that carries swept dim `dim`."""
    return f"dim_{dim}"


def _bind_dim(d: Any, values: Mapping[str, int]) -> int:
    d = norm_dim(d)
    if isinstance(d, int):
        return d
    out: int = 1
    for part in d.split("*"):
        if part.isdigit():
            out = out * int(part)
        elif part in values:
            out = out * values[part]
        else:
            raise IRError(f"dim {part!r} is not bound (bound: {sorted(values)})")
    return out


def bind_symbolic(graph: Graph, values: Mapping[str, int], dtype: str, dim: str) -> Graph:
    """`ir.bind(graph, values, dtype)` with `dim` bound to a SymDim at its value (products holding it are
    SymDims too), so the generated kernels read it from their runtime argument `arg_name(dim)`."""
    return bind(graph, {**values, dim: SymDim(values[dim], arg_name(dim))}, dtype, _bind_dim)
