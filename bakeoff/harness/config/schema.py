"""The YAML config, validated with pydantic. Every error names the file, the line and the field.

`load_config(path)` returns a `Config` whose workloads are resolved to graphs (built-in or parsed from
inline expressions), so everything wrong with a config is found before anything runs or is written.
"""
from __future__ import annotations

import math
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator, model_validator

from bakeoff.backends import REGISTRY, known as backend_known
from bakeoff.workloads.expr import ExprError, parse_expr
from bakeoff.workloads.decompose import decompose
from bakeoff.workloads.ir import DTYPES, Graph, IRError, bind, bind_dim, dim_names
from bakeoff.workloads.suite import builtin_workloads

from bakeoff.harness.config.yaml_lines import ConfigError, LocatedYaml, load_yaml

# Inputs bigger than this in all, or any one node's output bigger than this (in the float64 reference, after
# decomposition), are refused at load time: a typo of one digit must not exhaust memory.
MAX_INPUT_BYTES = 64 * 2**30
MAX_DIM = 2**31 - 1
PRESETS = ("smoke", "cpu", "gpu")
CASE_DTYPES = ("float32", "float16", "bfloat16")
BUILTIN_CONFIG_PATH = "<built-in default>"
DEVICE_HELP = "auto, cpu, cuda or cuda:N"


def check_device(v: str) -> str:
    """`v` if it names a device a config may ask for (auto, cpu, cuda, cuda:N); else ValueError."""
    if v in ("auto", "cpu", "cuda") or (v.startswith("cuda:") and v[5:].isdigit()):
        return v
    raise ValueError(f"device must be {DEVICE_HELP}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
    # load before sampling (0: none; the clock during sampling is recorded either way).
    profile_calls: int = Field(20, ge=3, le=10_000)
    sustained_s: float = Field(0.0, ge=0, le=600)
    # Who waits for a timing phase (harness/run/gate.py): exclusive = every other worker on the device;
    # timers_only = only other timing phases. profiler_warmup: start CUPTI in the pre-started worker.
    gate: Literal["exclusive", "timers_only"] = "exclusive"
    profiler_warmup: bool = False

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

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    expr: str | None = Field(None, max_length=4000)
    inputs: dict[str, list[int | str]] | None = None
    preset: str | None = None
    # Strict: a dim written `true` or '4' is a mistake to report, not a value to coerce.
    shapes: list[dict[str, StrictInt]] | None = None
    presets: dict[str, dict[str, StrictInt]] | None = None

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
    workloads: list[WorkloadConfig | str] = Field(min_length=1)
    backends: dict[str, dict[str, Any] | None] = Field(default_factory=lambda: {"eager": {}, "inductor": {}})
    seeds: list[Annotated[int, Field(ge=0, lt=2**63)]] = Field(default_factory=lambda: [0, 1], max_length=16)
    timing: TimingConfig = TimingConfig()
    compile: CompileConfig = CompileConfig()
    timeout_s: float = Field(600, gt=0, le=86_400)
    memory_limit_gb: float | None = Field(None, gt=0)

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
        if isinstance(v, list):  # `backends: [eager, inductor]` is accepted as a short form
            return {name: {} for name in v}
        return v

    @field_validator("backends")
    @classmethod
    def _backend_options(cls, v: dict) -> dict:
        if not v:
            raise ValueError("at least one backend is needed")
        return {k: dict(opts or {}) for k, opts in v.items()}


def check_backends(cfg: Config, where: LocatedYaml) -> None:
    """Keys of `backends` are labels: a backend's name, or any label with `backend: NAME` among its options
    (so one backend can run under several option sets, e.g. inductor default and max-autotune)."""
    for label, opts in cfg.backends.items():
        adapter = opts.get("backend", label)
        if not isinstance(adapter, str) or not backend_known(adapter):
            path = ("backends", label) + (("backend",) if "backend" in opts else ())
            raise where.error(path, f"unknown backend {adapter!r}; known: {', '.join(REGISTRY)}"
                                    + ("" if adapter != label else " (or give `backend: NAME` for a label)"))


class ResolvedWorkload(BaseModel):
    """A workload with its graph and the dim bindings to run it at, each with a label."""

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True)

    name: str
    graph: Graph
    shapes: list[tuple[str, dict[str, int]]]  # (preset label or "custom", dims)


def _check_shape(graph: Graph, dims: dict[str, int], where: LocatedYaml, path: tuple) -> None:
    needed = set().union(*(dim_names(n.shape) for n in graph.inputs))
    missing = sorted(needed - set(dims))
    if missing:
        raise where.error(path, f"dims {missing} are not given (needed: {sorted(needed)})")
    for k, v in dims.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or v > MAX_DIM:
            raise where.error(path + (k,), f"dim {k}={v!r} must be a positive integer <= {MAX_DIM}")
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


def resolve_workloads(cfg: Config, where: LocatedYaml, preset: str) -> list[ResolvedWorkload]:
    """Turn each workload entry into a graph plus shapes; errors name the entry's line."""
    suite = builtin_workloads()
    out = []
    for i, entry in enumerate(cfg.workloads):
        path: tuple = ("workloads", i)
        w = WorkloadConfig(name=entry) if isinstance(entry, str) else entry
        if w.expr is not None:
            try:
                graph = parse_expr(w.expr, w.inputs or {}, w.name)
            except ExprError as exc:
                raise where.error(path + ("expr",), str(exc)) from None
            presets = w.presets or {}
        elif w.name in suite:
            graph, presets = suite[w.name].graph, {**suite[w.name].presets, **(w.presets or {})}
        else:
            raise where.error(path + (("name",) if not isinstance(entry, str) else ()),
                              f"unknown workload {w.name!r}; built-in: {', '.join(suite)}")
        if w.shapes:
            shapes = [("custom", dict(s)) for s in w.shapes]
            for j, s in enumerate(w.shapes):
                _check_shape(graph, dict(s), where, path + ("shapes", j))
        else:
            label = w.preset or preset
            if label not in presets:
                raise where.error(path + (("preset",) if w.preset else ()),
                                  f"workload {w.name!r} has no preset {label!r}; it has {sorted(presets)}"
                                  + ("; give `shapes` or `presets`" if w.expr else ""))
            _check_shape(graph, dict(presets[label]), where, path)
            shapes = [(label, dict(presets[label]))]
        out.append(ResolvedWorkload(name=w.name, graph=graph, shapes=shapes))
    names = [w.name for w in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise where.error(("workloads",), f"workload {sorted(dup)[0]!r} appears twice")
    return out


def _pydantic_error(exc: ValidationError, where: LocatedYaml) -> ConfigError:
    err = exc.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p in ("str", "WorkloadConfig"))))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = f"unknown key {loc[-1]!r}" if loc else "unknown key"
    elif err["type"] == "missing":
        msg = f"missing required field {loc[-1]!r}" if loc else msg
    if "input" in err and err["type"] not in ("extra_forbidden", "missing"):
        bad = err["input"]
        if isinstance(bad, str | int | float | bool):
            msg += f" (got {bad!r})"
    return where.error(loc, msg)


def parse_config(text: str, file: str) -> tuple[Config, LocatedYaml]:
    """Validate YAML text into a Config; raises ConfigError naming file, line and field."""
    where = load_yaml(text, file)
    if not isinstance(where.data, dict):
        raise ConfigError(file, 1, "", "a config must be a YAML mapping (key: value)")
    try:
        cfg = Config.model_validate(where.data)
    except ValidationError as exc:
        raise _pydantic_error(exc, where) from None
    check_backends(cfg, where)
    return cfg, where


def load_config(path: str | Path) -> tuple[Config, LocatedYaml, str]:
    """Read and validate a config file. Returns the config, the located YAML and the raw text."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigError(str(path), None, "", f"cannot read config: {exc.strerror}") from None
    cfg, where = parse_config(text, str(path))
    return cfg, where, text


def default_config_text() -> str:
    """The built-in default config (bakeoff/harness/config/default.yaml)."""
    return resources.files("bakeoff.harness.config").joinpath("default.yaml").read_text()


__all__ = ["Config", "ConfigError", "TimingConfig", "load_config", "parse_config", "resolve_workloads",
           "default_config_text", "PRESETS", "DTYPES", "IRError"]
