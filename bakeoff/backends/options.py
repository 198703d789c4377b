"""Typed backend options: each backend declares its YAML options as a pydantic model (`Backend.Options`).

The config loader validates `backends: {LABEL: {...}}` against the model of the label's backend, so a typo
or a bad value is refused at load time, naming the file, the line and the field, before anything runs.
The planner then parses each label's options once into an instance of the model (`Backend.parse_options`),
which the label's cases carry to their workers and the adapter receives. `option_rows` describes a model for
`bakeoff list backends --options`.
"""
from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticUndefined


class BackendOptions(BaseModel):
    """Base of every backend's options: unknown keys are errors, values are not coerced across types (a
    `true` is not an int, a "4" is not a number), floats are finite, and an instance is immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class OptionsError(ValueError):
    """Options a backend refuses (outside the config loader, which names the line instead)."""


def clip(text: str, limit: int = 60) -> str:
    """`text` cut to `limit` characters, the cut marked: what a message echoes of its input (a name, a value;
    config errors too) stays short however long the input was. A hard cut: textwrap.shorten cuts at words and
    would drop a one-word name or value whole."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def errors_text(exc: ValidationError, most: int = 3) -> str:
    """One line naming the first few bad options: "unknown option 'mdoe'; mode: Input should be ..."."""
    parts = []
    for err in exc.errors()[:most]:
        field = ".".join(clip(str(p), 40) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown option {field!r}")
        else:
            parts.append(f"{field or 'options'}: {clip(err['msg'].removeprefix('Value error, '), 200)}")
    more = len(exc.errors()) - most
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class NoOptions(BackendOptions):
    """A backend that takes no options: any key is refused."""


def type_text(annotation: Any) -> str:
    """A short, readable form of a field's type: `int | None`, `'strong' | 'weak'`, `list[str]`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_text(args[0])
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_text(a) for a in args)}]" if args else name
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _default_text(field: Any) -> str:
    if field.default is PydanticUndefined:
        return repr(field.default_factory()) if field.default_factory is not None else "(required)"
    return repr(field.default)


def bounds_text(field: Any) -> str:
    """A field's numeric bounds and length limit, e.g. "0 <= x <= 5", "x >= 18", "len <= 256"; "" if none."""
    def bound(*names: str) -> tuple[str, Any] | None:
        return next(((n, getattr(m, n)) for m in field.metadata for n in names if getattr(m, n, None) is not None),
                    None)

    ops = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    low, high, size = bound("ge", "gt"), bound("le", "lt"), bound("max_length")
    if low and high:
        value = f"{low[1]} {ops[low[0]].replace('>', '<')} x {ops[high[0]]} {high[1]}"
    elif low or high:
        op, limit = low or high
        value = f"x {ops[op]} {limit}"
    else:
        value = ""
    return ", ".join(p for p in (value, f"len <= {size[1]}" if size else "") if p)


def option_rows(model: type[BaseModel]) -> list[tuple[str, str, str, str]]:
    """(name, type, default, description) for each field of an options model, in declaration order; the
    type carries the field's bounds ("int, 0 <= x <= 5")."""
    rows = []
    for name, f in model.model_fields.items():
        bounds = bounds_text(f)
        rows.append((name, type_text(f.annotation) + (f", {bounds}" if bounds else ""), _default_text(f),
                     f.description or ""))
    return rows
