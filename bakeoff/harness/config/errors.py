"""A pydantic ValidationError as a ConfigError that names the YAML line and field of the first error."""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bakeoff.backends.options import clip
from bakeoff.harness.config.yaml_lines import ConfigError, LocatedYaml, Path

ECHO_CHARS = 60  # the most of a bad value a message repeats


def yaml_path(loc: tuple, data: Any) -> Path:
    """The YAML path of a pydantic error location: the keys and indices found in `data`, in order.

    pydantic puts the names of union members and validators in `loc` ("str", "function-after[...]",
    "WorkloadConfig", "dict[str,any]"); those are not in the data and are dropped. A last element not in the
    data is kept when it names a field of a mapping (a missing field)."""
    path: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif i == len(loc) - 1 and isinstance(node, dict) and isinstance(part, str) and "[" not in part:
            path.append(part)
    return tuple(path)


def shown(value: Any) -> str:
    """A bad value as a message repeats it: its repr, cut to ECHO_CHARS."""
    return clip(repr(value), ECHO_CHARS)


def pydantic_error(exc: ValidationError, where: LocatedYaml, data: Any = None, prefix: Path = (),
                   unknown_hint: str = "") -> ConfigError:
    """The first error of `exc` located in the YAML. `data` is what was validated (default: the whole
    document), `prefix` its path in the document; `unknown_hint` is added to an unknown key's message."""
    err = exc.errors()[0]
    root = where.data if data is None else data
    path = prefix + yaml_path(tuple(err["loc"]), root)
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = (f"unknown key {clip(str(path[-1]), ECHO_CHARS)!r}" if path else "unknown key") + unknown_hint
    elif err["type"] == "missing":
        msg = f"missing required field {path[-1]!r}" if path else msg
    elif err["type"] in ("model_type", "dict_type"):
        msg = "expected a mapping (key: value)" + (f", got {shown(err['input'])}" if err.get("input") is not None
                                                   else ", got nothing")
    elif err["type"] != "value_error" and isinstance(err.get("input"), str | int | float | bool):
        msg += f" (got {shown(err['input'])})"   # our own validators' messages name the value themselves
    return where.error(path, msg)
