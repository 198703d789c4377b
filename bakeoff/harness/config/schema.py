"""The YAML config, validated with pydantic. Every error names the file, the line and the field.

`load_config(path)` returns a `Config` whose workloads are resolved to graphs (built-in or parsed from
inline expressions), so everything wrong with a config is found before anything runs or is written.
"""
from __future__ import annotations

import math
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator, model_validator

from bakeoff.workloads.expr import ExprError, parse_expr
from bakeoff.workloads.decompose import decompose
from bakeoff.workloads.ir import DTYPES, Graph, IRError, bind, bind_dim, dim_names
from bakeoff.workloads.suite import every_workload

from bakeoff.harness.config.backend_options import check_backends
from bakeoff.harness.config.errors import pydantic_error
from bakeoff.harness.config.source import check_size, read_config_file
from bakeoff.harness.config.yaml_lines import ConfigError, LocatedYaml, clip, load_yaml
from bakeoff.harness.config.inputs import resolve_inits
from bakeoff.harness.config.sweep import SweepConfig

# Inputs bigger than this in all, or any one node's output bigger than this (in the float64 reference, after
# decomposition), are refused at load time: a typo of one digit must not exhaust memory.
MAX_INPUT_BYTES = 64 * 2**30
MAX_DIM = 2**31 - 1
PRESETS = ("smoke", "cpu", "gpu")
CASE_DTYPES = ("float32", "float16", "bfloat16")
BUILTIN_CONFIG_PATH = "<built-in default>"
DEVICE_HELP = "auto, cpu, cuda or cuda:N"
# A name the harness keys on (workloads; the same rule as the YAML `name:` of an inline workload).
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]*$"
Name = Annotated[str, Field(min_length=1, max_length=64, pattern=NAME_PATTERN)]


def check_device(v: str) -> str:
    """`v` if it names a device a config may ask for (auto, cpu, cuda, cuda:N); else ValueError."""
    if v in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:(0|[1-9][0-9]{0,3})", v):
        return v
    raise ValueError(f"device must be {DEVICE_HELP}")


class _Strict(BaseModel):
    # Values keep their YAML type (`yes` or "4" is not coerced to a bool or a number; an int is a float), and
    # every float is finite: `.inf` or `.nan` is never a meaningful time, size or limit.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class TimingConfig(_Strict):
    """How latency is measured. Times in seconds; the target is IQR/median."""

    warmup_s: float = Field(0.2, ge=0, le=60)
    budget_s: float = Field(1.0, gt=0, le=600)
    min_reps: int = Field(5, ge=1, le=100_000)
    max_reps: int = Field(10_000, ge=1, le=1_000_000)
    target_iqr: float = Field(0.05, gt=0, le=1)
    flush_l2: bool = True
    cuda_graph: bool = True
    profile: bool = True
    # Calls profiled by CUPTI per target (the headline's distribution on a GPU), and seconds of continuous
    # load before the timer (auto: measure.figures.AUTO_SUSTAINED_S on a GPU, none on the CPU), topped up
    # before the CUPTI pass (at most TOP_UP_S); the clock during sampling is recorded either way.
    profile_calls: int = Field(20, ge=3, le=10_000)
    sustained_s: Annotated[float, Field(ge=0, le=600)] | Literal["auto"] = "auto"
    # What a timing phase waits for (harness/supervise/gate.py): exclusive = every other worker on the device;
    # timers_only = only other timing phases; beside_compiles = every other worker's device work, not its
    # host-side compiles and imports; auto = beside_compiles on a GPU with the CUPTI pass, else exclusive
    # (supervise/gate_policy.py). profiler_warmup: start CUPTI in the pre-started worker, before the case.
    gate: Literal["auto", "exclusive", "timers_only", "beside_compiles"] = "auto"
    profiler_warmup: bool = True

    @model_validator(mode="after")
    def _reps(self) -> "TimingConfig":
        if self.min_reps > self.max_reps:
            raise ValueError("min_reps must not exceed max_reps")
        return self


class CompileConfig(_Strict):
    """Cold compile always runs in a fresh process with empty caches; `warm` adds a second process."""

    warm: bool = True


class WorkloadConfig(_Strict):
    """A built-in workload by name, or an inline one (`expr` + `inputs`)."""

    name: Name
    expr: str | None = Field(None, max_length=4000)
    inputs: dict[str, list[StrictInt | str]] | None = None
    preset: str | None = Field(None, max_length=64)
    # Strict: a dim written `true` or '4' is a mistake to report, not a value to coerce.
    shapes: list[dict[str, StrictInt]] | None = Field(None, min_length=1, max_length=1000)
    presets: dict[str, dict[str, StrictInt]] | None = None
    # How each input is filled (harness/config/inputs.py), and dtypes that replace the config's for this entry.
    init: dict[str, Any] | None = None
    dtypes: Annotated[list[Literal["float32", "float16", "bfloat16"]], Field(min_length=1)] | None = None
    # Measure the training step: forward and backward of sum(outputs * fixed random cotangents), gradients for
    # every floating input (workloads/grad.py). Its cases are named `<workload> (fwd+bwd)`.
    grad: bool = False
    # One symbolic dim served at several values by one case (harness/config/sweep.py).
    sweep: SweepConfig | None = None

    @model_validator(mode="after")
    def _inline(self) -> "WorkloadConfig":
        if self.expr is None and self.inputs is not None:
            raise ValueError("`inputs` only goes with `expr`")
        if self.expr is not None and self.inputs is None:
            raise ValueError("an inline workload (`expr`) needs `inputs`: name -> symbolic shape")
        return self


class Config(_Strict):
    """A benchmark configuration (one YAML file)."""

    name: str = Field("bakeoff", max_length=128)
    description: str = ""
    device: Literal["auto", "cpu", "cuda"] | str = "auto"
    preset: str = "auto"
    # None: the device's default (float32 on the CPU, bfloat16 on CUDA); an empty list is a mistake.
    dtypes: Annotated[list[Literal["float32", "float16", "bfloat16"]], Field(min_length=1)] | None = None
    # A bare string is a built-in workload by name: `- softmax` is `- name: softmax`.
    workloads: list[WorkloadConfig] = Field(min_length=1, max_length=1000)
    # label -> options; a label is the backend's name, or any label with `backend: NAME` among its options.
    backends: dict[Annotated[str, Field(min_length=1, max_length=64)], dict[str, Any] | None] = Field(
        default_factory=lambda: {"eager": {}, "inductor": {}}, max_length=100)
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=lambda: [0, 1], max_length=16)
    timing: TimingConfig = TimingConfig()
    compile: CompileConfig = CompileConfig()
    timeout_s: float = Field(600, gt=0, le=86_400)
    # The worker's address-space cap on the CPU (RLIMIT_AS); at most 1 PiB.
    memory_limit_gb: float | None = Field(None, gt=0, le=2**20)

    @field_validator("workloads", mode="before")
    @classmethod
    def _bare_names(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"name": w} if isinstance(w, str) else w for w in v]
        return v

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"dtypes must be distinct, got {v}")
        return v

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        return check_device(v)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"seeds must be distinct, got {v}")
        if len(v) < 2:
            raise ValueError(f"seeds must list at least two distinct seeds (every case's numerics are checked "
                             f"on each), got {v}")
        return v

    @field_validator("backends", mode="before")
    @classmethod
    def _backend_list(cls, v: Any) -> Any:
        # `backends: [eager, inductor]` is a short form of `{eager: {}, inductor: {}}`; a name listed twice is
        # refused by check_backends, which knows its line.
        if isinstance(v, list) and all(isinstance(name, str) for name in v):
            return {name: {} for name in v}
        if isinstance(v, list):
            raise ValueError("backends is a mapping of label -> options, or a list of backend names")
        return v

    @field_validator("backends")
    @classmethod
    def _backend_options(cls, v: dict) -> dict:
        if not v:
            raise ValueError("at least one backend is needed")
        return {k: dict(opts or {}) for k, opts in v.items()}


class ResolvedWorkload(BaseModel):
    """A workload with its graph and the dim bindings to run it at, each with a label."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    graph: Graph  # with the config's inits applied
    shapes: list[tuple[str, dict[str, int]]]  # (preset label or "custom", dims)
    dtypes: list[str] = ["float32"]
    input_files: dict[str, str] = {}  # SHA-256 -> absolute path of each file an input is read from
    grad: bool = False  # the training step (forward + backward), not the forward alone
    # The swept dim and its values in serving order (each shape's dims hold the first value), or None.
    sweep: tuple[str, tuple[int, ...]] | None = None


def _check_dims(graph: Graph, dims: dict[str, int], where: LocatedYaml, path: tuple) -> None:
    """`dims` names exactly the graph's dims, each a positive integer."""
    needed = set().union(*(dim_names(n.shape) for n in graph.inputs))
    unknown = [k for k in dims if k not in needed]
    if unknown:  # a typo (`n` for `N`), or a dim of another workload: it would only rename the case
        raise where.error(path + (unknown[0],), f"{clip(unknown[0], 40)!r} is not a dim of this workload "
                                                f"(its dims: {', '.join(sorted(needed)) or 'none'})")
    missing = sorted(needed - set(dims))
    if missing:
        raise where.error(path, f"dims {missing} are not given (needed: {sorted(needed)})")
    for k, v in dims.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v > MAX_DIM:
            raise where.error(path + (k,), f"dim {k}={v!r} must be a positive integer <= {MAX_DIM}")


def _check_shape(graph: Graph, dims: dict[str, int], where: LocatedYaml, path: tuple) -> None:
    _check_dims(graph, dims, where, path)
    total = 0
    for n in graph.inputs:
        numel = math.prod(bind_dim(d, dims) for d in n.shape)
        total += numel * 8
    limit = f"(limit {MAX_INPUT_BYTES / 2**30:.0f} GiB): shape too large"
    if total > MAX_INPUT_BYTES:
        raise where.error(path, f"inputs would take {total / 2**30:.1f} GiB in float64 {limit}")
    # Every node's output too (a matmul or a broadcast can be far bigger than its inputs), symbolic first,
    # then after decomposition (the reference evaluates the decomposed graph, e.g. attention's scores).
    try:
        for n in graph.nodes:
            nbytes = math.prod(bind_dim(d, dims) for d in n.shape) * 8
            if nbytes > MAX_INPUT_BYTES:
                raise where.error(path, f"node %{n.id} ({n.op}) output would take {nbytes / 2**30:.1f} GiB in "
                                        f"float64 {limit}")
        bound = bind(graph, dims, "float32")
    except IRError as exc:
        raise where.error(path, str(exc)) from None
    try:
        nodes = decompose(bound).nodes
    except IRError:  # a graph the reference cannot decompose fails in its worker, with the reason
        return
    for n in nodes:
        nbytes = n.numel * 8
        if nbytes > MAX_INPUT_BYTES:
            raise where.error(path, f"the float64 reference's intermediate {n.op} output would take "
                                    f"{nbytes / 2**30:.1f} GiB {limit}")


def _sweep_of(w: WorkloadConfig, graph: Graph, where: LocatedYaml, path: tuple,
              preset: str | None) -> tuple[str, tuple[int, ...]] | None:
    """The entry's (dim, values) at `preset` (None: an entry with `shapes`), its dim checked against the graph's."""
    if w.sweep is None:
        return None
    needed = set().union(*(dim_names(n.shape) for n in graph.inputs))
    if w.sweep.dim not in needed:
        raise where.error(path + ("sweep", "dim"), f"{clip(w.sweep.dim, 40)!r} is not a dim of this workload "
                                                   f"(its dims: {', '.join(sorted(needed)) or 'none'})")
    return w.sweep.dim, tuple(w.sweep.points_for(preset))


def _swept(graph: Graph, dims: dict[str, int], sweep: tuple[str, tuple[int, ...]] | None, where: LocatedYaml,
           path: tuple) -> dict[str, int]:
    """A shape's dims, checked as `_check_shape` does; for a sweep, at its largest value (the size limits) and
    at each other value (every dim positive), returned with the swept dim at the first value."""
    if sweep is None:
        _check_shape(graph, dims, where, path)
        return dims
    dim, values = sweep
    _check_shape(graph, dims | {dim: max(values)}, where, path)
    for v in values:
        _check_dims(graph, dims | {dim: v}, where, path)
    return dims | {dim: values[0]}


def _check_uses_inputs(graph: Graph, where: LocatedYaml, path: tuple) -> None:
    """An inline expression's output depends on its inputs, and every declared input is used: `1.0 + 2.0` is
    a constant (no case can time or check it), an unused input is a typo or a leftover."""
    used, todo = set(), list(graph.outputs)
    while todo:
        node = graph.node(todo.pop())
        if node.id not in used:
            used.add(node.id)
            todo.extend(node.inputs)
    names = [n.attr("name") for n in graph.inputs if n.id in used]
    if not names:
        raise where.error(path, "the expression uses none of its inputs: it is a constant, nothing to benchmark")
    unused = [n.attr("name") for n in graph.inputs if n.id not in used]
    if unused:
        raise where.error(path, f"input {clip(unused[0], 40)!r} is declared but the expression does not use it")


def dim_order(graph: Graph, presets: dict[str, dict[str, int]]) -> list[str]:
    """The order a workload's dims are written in case ids: its first preset's, then first use in the
    graph's inputs. So one shape always gets one case id, however its keys were ordered in the YAML."""
    order = list(next(iter(presets.values()), {}))
    for n in graph.inputs:
        order += [name for d in n.shape if isinstance(d, str) for name in d.split("*")
                  if not name.isdigit() and name not in order]
    return order


def _ordered(dims: dict[str, int], order: list[str]) -> dict[str, int]:
    return {k: dims[k] for k in order if k in dims} | dims


def default_dtypes(device: str) -> list[str]:
    """The dtypes of a config that names none: float32 on the CPU, bfloat16 on CUDA."""
    return ["float32"] if device.split(":")[0] == "cpu" else ["bfloat16"]


def resolve_workloads(cfg: Config, where: LocatedYaml, preset: str, device: str = "cpu") -> list[ResolvedWorkload]:
    """Turn each workload entry into a graph plus shapes and dtypes; errors name the entry's line."""
    suite = every_workload()
    out = []
    for i, w in enumerate(cfg.workloads):
        path: tuple = ("workloads", i)
        if w.expr is not None:
            try:
                graph = parse_expr(w.expr, w.inputs or {}, w.name)
            except ExprError as exc:
                raise where.error(path + ("expr",), str(exc)) from None
            _check_uses_inputs(graph, where, path + ("expr",))
            presets = w.presets or {}
        elif w.name in suite:
            graph, presets = suite[w.name].graph, {**suite[w.name].presets, **(w.presets or {})}
        else:
            raise where.error(path + ("name",), f"unknown workload {w.name!r}; built-in: {', '.join(suite)}")
        for label, dims in (w.presets or {}).items():   # every preset the entry defines, used or not
            _check_dims(graph, dict(dims), where, path + ("presets", label))
        order = dim_order(graph, presets)
        sweep = _sweep_of(w, graph, where, path, None if w.shapes else (w.preset or preset))
        if w.shapes:
            shapes, seen = [], {}
            for j, s in enumerate(w.shapes):
                s = _swept(graph, dict(s), sweep, where, path + ("shapes", j))
                key = tuple(sorted(s.items()))
                if key in seen:
                    raise where.error(path + ("shapes", j), f"this shape is listed twice (item {seen[key]} is "
                                                            "the same dims): it would be measured twice")
                seen[key] = j
                shapes.append(("custom", _ordered(dict(s), order)))
        else:
            label = w.preset or preset
            if label not in presets:
                raise where.error(path + (("preset",) if w.preset else ()),
                                  f"workload {w.name!r} has no preset {label!r}; it has {sorted(presets)}"
                                  + ("; give `shapes` or `presets`" if w.expr else ""))
            dims = _swept(graph, dict(presets[label]), sweep, where, path)
            shapes = [(label, _ordered(dims, order))]
        dtypes = list(w.dtypes or cfg.dtypes or default_dtypes(device))
        every = [d for _, d in shapes] if sweep is None else [d | {sweep[0]: v} for _, d in shapes for v in sweep[1]]
        graph, files = resolve_inits(w.init, graph, every, dtypes, where, path)
        if w.grad and sweep is not None:
            raise where.error(path + ("grad",), "grad: true with a sweep is not supported: a sweep serves the "
                                                "forward; list the training step as its own entry")
        out.append(ResolvedWorkload(name=w.name, graph=graph, shapes=shapes, dtypes=dtypes, input_files=files,
                                    grad=w.grad, sweep=sweep))
    # One entry per workload and mode: the forward and the training step of a workload may both be listed.
    names = [(w.name, w.grad) for w in out]
    for j, key in enumerate(names):
        if key in names[:j]:
            raise where.error(("workloads", j), f"workload {key[0]!r}{' with grad: true' if key[1] else ''} appears "
                                                f"twice (first as item {names.index(key)}); give one entry several "
                                                "`shapes`")
    return out


def parse_config(text: str, file: str) -> tuple[Config, LocatedYaml]:
    """Validate YAML text into a Config; raises ConfigError naming file, line and field."""
    check_size(len(text.encode("utf-8", "surrogatepass")), file)
    where = load_yaml(text, file)
    if not isinstance(where.data, dict):
        raise ConfigError(file, 1, "", "a config must be a YAML mapping (key: value)")
    try:
        cfg = Config.model_validate(where.data)
    except ValidationError as exc:
        raise pydantic_error(exc, where) from None
    check_backends(cfg.backends, where)
    return cfg, where


def load_config(path: str | Path) -> tuple[Config, LocatedYaml, str]:
    """Read (config.source.read_config_file) and validate a config file. Returns the config, the located
    YAML and the raw text."""
    text = read_config_file(path)
    cfg, where = parse_config(text, str(path))
    return cfg, where, text


def default_config_text() -> str:
    """The built-in default config (bakeoff/harness/config/default.yaml)."""
    return resources.files("bakeoff.harness.config").joinpath("default.yaml").read_text()


__all__ = ["Config", "ConfigError", "TimingConfig", "load_config", "parse_config", "read_config_file",
           "resolve_workloads", "default_config_text", "PRESETS", "DTYPES", "IRError"]
