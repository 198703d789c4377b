"""The values each op's attributes may take, checked as a node is built (`GraphBuilder.emit`).

Every lowering reads an attribute as its own framework does (torch's `F.gelu` refuses an unknown
`approximate`, JAX's and the float64 reference's take anything but 'tanh' as exact), so a value outside these
rules would fail on some backends and run as something else on others. Checked once here, an inline
expression such as ``gelu(x, approximate='fast')`` is refused where the config writes it.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from bakeoff.workloads.ir import IRError


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _one_of(*allowed: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: isinstance(v, str) and v in allowed), "one of " + ", ".join(repr(a) for a in allowed)


def _sequence(item: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, tuple | list) and all(item(d) for d in v)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _dim(d: Any) -> bool:
    return isinstance(d, str) or _int(d)


_FINITE = (_number, "a finite number")
_EPS = (lambda v: _number(v) and v >= 0, "a finite number >= 0")
_DIMS = (_sequence(_dim), "a list of dims (integers or names such as 'M' or 'H*Dh')")

# (op, attribute) -> (predicate, what the value must be, in words). Attributes not listed take any value the
# op's own checks accept (cast's dtype: GraphBuilder; sdpa's scale: None or below).
RULES: dict[tuple[str, str], tuple[Callable[[Any], bool], str]] = {
    ("gelu", "approximate"): _one_of("none", "tanh"),
    ("pow", "exponent"): _FINITE,
    ("reshape", "shape"): _DIMS,
    ("broadcast", "shape"): _DIMS,
    ("transpose", "perm"): (_sequence(_int), "a list of axis numbers, e.g. (1, 0)"),
    ("var", "correction"): (lambda v: _int(v) and v >= 0, "an integer >= 0"),
    ("layer_norm", "eps"): _EPS,
    ("rms_norm", "eps"): _EPS,
    ("sdpa", "causal"): (lambda v: isinstance(v, bool), "True or False"),
    ("sdpa", "scale"): (lambda v: v is None or _number(v), "a finite number (or left out: 1/sqrt(head dim))"),
}


def check_attrs(op: str, attrs: dict[str, Any]) -> None:
    """Raise IRError naming the first attribute of `op` whose value its rule refuses."""
    for name, value in attrs.items():
        rule = RULES.get((op, name))
        if rule is not None and not rule[0](value):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:59] + "…"
            raise IRError(f"{op}'s {name} must be {rule[1]}, got {shown}")
