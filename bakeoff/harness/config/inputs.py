"""How a config fills a workload's inputs (the `init` key of a workload entry), checked at load time.

    workloads:
      - name: layernorm_gelu
        init:
          x: {dist: normal, mean: 1.0e4, std: 1}          # also uniform (low, high), fan_in,
          w: {values: [1.0]}                              #   mix, lognormal: see the models below
          b: {file: tensors/b.npy}                        # or .safetensors, with `key`; relative to the config

Each entry becomes the input node's `init` (workloads/inits.py), so it travels inside the case's graph to
the worker and enters the graph's digest. Files are checked here, before anything runs: the format, the
tensor's shape against every shape the workload runs at, its dtype against every dtype it runs in (another
dtype only with `cast: true`); their SHA-256 goes into the init, their path into the case.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError,
                      model_validator)

from bakeoff.workloads import inits
from bakeoff.workloads.ir import Graph, bind_dim
from bakeoff.workloads.tensor_files import TensorFileError, file_sha256, read_header, safetensors_table

from bakeoff.harness.config.yaml_lines import LocatedYaml

MAX_VALUES = 4096


def _no_bool(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("expected a number, got a boolean")
    return v


# A finite number (an int is one too; a string such as '4' is not: the models are strict).
Num = Annotated[float, BeforeValidator(_no_bool), Field(allow_inf_nan=False)]
# Explicit values may be infinite or NaN on purpose (.inf, -.inf, .nan in YAML).
AnyNum = Annotated[float, BeforeValidator(_no_bool)]
Positive = Annotated[float, BeforeValidator(_no_bool), Field(gt=0, allow_inf_nan=False)]


class _Init(BaseModel):
    # Strict like every other section (config/strict.py): '4' is not 4, `yes` is not true. Not Strict itself:
    # explicit values may be infinite or NaN (AnyNum).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def to_init(self) -> tuple:
        """The canonical init (workloads/inits.py); files are resolved by `resolve_inits` instead."""
        params = self.model_dump(exclude={"dist"})
        return inits.make_init(getattr(self, "dist", None) or self.kind, **params)


class NormalInit(_Init):
    """Normal with `mean` and `std`."""

    dist: Literal["normal"]
    mean: Num = 0.0
    std: Positive = 1.0


class UniformInit(_Init):
    """Uniform on [low, high)."""

    dist: Literal["uniform"]
    low: Num = 0.0
    high: Num = 1.0

    @model_validator(mode="after")
    def _order(self) -> "UniformInit":
        if not self.low < self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        return self


class FanInInit(_Init):
    """Normal with std 1/sqrt(fan_in), fan_in = the second-to-last dim (a weight's input features)."""

    dist: Literal["fan_in"]


class MixInit(_Init):
    """Normal (mean, std) with ceil(outlier_share x n) outliers from normal (mean, outlier_std): single
    elements, whole columns (last axis: outlier features) or whole rows (second-to-last axis)."""

    dist: Literal["mix"]
    mean: Num = 0.0
    std: Positive = 1.0
    outlier_share: Annotated[float, BeforeValidator(_no_bool), Field(ge=0, le=1)] = 0.01
    outlier_std: Positive = 100.0
    outliers: Literal["elements", "columns", "rows"] = "elements"


class LogNormalInit(_Init):
    """Magnitudes 10**N(log10_mean, log10_std) (orders of magnitude), signs random, positive or negative."""

    dist: Literal["lognormal"]
    log10_mean: Num = 0.0
    log10_std: Annotated[float, BeforeValidator(_no_bool), Field(ge=0, allow_inf_nan=False)] = 1.0
    sign: Literal["random", "positive", "negative"] = "random"


class ValuesInit(_Init):
    """Explicit values: one row along the last axis (padded with `pad`, else repeated; the same in every
    row), or exactly the whole tensor in row-major order. The same for every seed."""

    kind: Literal["values"] = Field("values", exclude=True)
    values: list[AnyNum] = Field(min_length=1, max_length=MAX_VALUES)
    pad: AnyNum | None = None


class FileInit(_Init):
    """A tensor from a .npy or .safetensors file (path relative to the config file); `key` names the tensor
    in a .safetensors file (default: the input's name, or the only tensor). Its dtype must be the case's
    unless `cast: true` rounds it. The same for every seed."""

    kind: Literal["file"] = Field("file", exclude=True)
    file: str = Field(min_length=1, max_length=4096)
    key: str | None = Field(None, min_length=1)
    cast: bool = False


def _tag(v: Any) -> str | None:
    if isinstance(v, dict):
        if "dist" in v:
            return str(v["dist"]) if v["dist"] in DISTS else "unknown"
        for key in ("values", "file"):
            if key in v:
                return key
    return None


DISTS = ("normal", "uniform", "fan_in", "mix", "lognormal")
InitSpec = Annotated[Union[
    Annotated[NormalInit, Tag("normal")], Annotated[UniformInit, Tag("uniform")], Annotated[FanInInit, Tag("fan_in")],
    Annotated[MixInit, Tag("mix")], Annotated[LogNormalInit, Tag("lognormal")], Annotated[ValuesInit, Tag("values")],
    Annotated[FileInit, Tag("file")]],
    Discriminator(_tag, custom_error_type="init_kind",
                  custom_error_message="an input's init needs `dist` (normal, uniform, fan_in, mix, lognormal), "
                                       "`values` or `file`")]
_ADAPTER: TypeAdapter = TypeAdapter(InitSpec)


def parse_spec(raw: Any, where: LocatedYaml, path: tuple) -> _Init:
    """One input's init entry as a model; a ConfigError naming its line and field otherwise."""
    if isinstance(raw, dict) and "dist" in raw and raw["dist"] not in DISTS:
        raise where.error(path + ("dist",), f"unknown distribution {raw['dist']!r}; known: {', '.join(DISTS)}")
    try:
        return _ADAPTER.validate_python(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        if loc and loc[0] in DISTS + ("values", "file"):
            loc = loc[1:]  # the tag pydantic adds: not a key of the YAML
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = f"unknown key {loc[-1]!r}"
        if "input" in err and isinstance(err["input"], str | int | float) and err["type"] != "extra_forbidden":
            msg += f" (got {err['input']!r})"
        raise where.error(path + loc, msg) from None


def _check_values(spec: ValuesInit, name: str, shapes: list[tuple[int, ...]], where: LocatedYaml,
                  path: tuple) -> None:
    n = len(spec.values)
    for shape in shapes:
        numel, row = math.prod(shape), (shape[-1] if shape else 1)
        if n != numel and n > row:
            raise where.error(path + ("values",), f"{n} values fit input {name!r} of shape {list(shape)} neither "
                                                  f"as one row (at most {row}, repeated or padded) nor as the "
                                                  f"whole tensor ({numel})")


def _resolve_file(spec: FileInit, name: str, shapes: list[tuple[int, ...]], dtypes: list[str], where: LocatedYaml,
                  path: tuple) -> tuple[tuple, str]:
    """(init, absolute path) of a file input, after checking it against the shapes and dtypes it runs at."""
    base = Path(where.file).resolve().parent if Path(where.file).exists() else Path.cwd()
    file = (base / spec.file).resolve()
    at = path + ("file",)
    if not file.is_file():
        raise where.error(at, f"no such file: {file}")
    key = spec.key
    try:
        if file.suffix.lower() == ".safetensors":
            table = safetensors_table(file)[1]
            if key is not None and key not in table:
                raise where.error(path + ("key",), f"{file.name} has no tensor {key!r}; it has "
                                                   f"{', '.join(sorted(table)[:8]) or 'none'}")
            if key is None and (name in table or len(table) != 1):
                key = name  # the input's own name, unless the file holds just one tensor
        header = read_header(file, key)
    except (TensorFileError, OSError) as exc:
        raise where.error(at, str(exc)) from None
    for shape in shapes:
        if header.shape != shape:
            raise where.error(at, f"{file.name}{f'[{header.key}]' if header.key else ''} holds shape "
                                  f"{list(header.shape)}; input {name!r} is {list(shape)} here")
    wrong = [d for d in dtypes if d != header.dtype]
    if wrong and not spec.cast:
        raise where.error(at, f"{file.name} holds {header.dtype}; this workload runs in {', '.join(wrong)}: give "
                              f"a file of that dtype, or `cast: true` to round it to the case's dtype")
    if header.dtype == "bool" or (header.dtype.startswith(("int", "uint")) and not spec.cast):
        raise where.error(at, f"{file.name} holds {header.dtype}: inputs are floating point")
    sha = file_sha256(file)
    return inits.make_init("file", sha256=sha, key=header.key, cast=spec.cast), str(file)


def resolve_inits(raw: dict[str, Any] | None, graph: Graph, dims_list: list[dict[str, int]], dtypes: list[str],
                  where: LocatedYaml, path: tuple) -> tuple[Graph, dict[str, str]]:
    """`graph` with the config's inits applied, and the files it reads (SHA-256 -> absolute path).

    `dims_list` are the bindings the workload runs at and `dtypes` its dtypes; `path` is the workload
    entry's path in the YAML (errors name `path + ("init", input, field)`)."""
    if not raw:
        return graph, {}
    if not isinstance(raw, dict):
        raise where.error(path + ("init",), "init maps input names to how each is filled")
    nodes = {n.attr("name"): n for n in graph.inputs}
    new, files = {}, {}
    for name, entry in raw.items():
        at = path + ("init", name)
        if name not in nodes:
            raise where.error(at, f"the workload has no input {name!r}; its inputs: {', '.join(nodes)}")
        spec = parse_spec(entry, where, at)
        node = nodes[name]
        shapes = [tuple(bind_dim(d, dims) for d in node.shape) for dims in dims_list]
        fixed = [node.dtype] if node.dtype != "T" else dtypes
        if isinstance(spec, ValuesInit):
            _check_values(spec, name, shapes, where, at)
        if isinstance(spec, FileInit):
            new[name], file = _resolve_file(spec, name, shapes, fixed, where, at)
            files[inits.parse_init(new[name])[1]["sha256"]] = file
        else:
            new[name] = spec.to_init()
    return inits.with_inits(graph, new), files
