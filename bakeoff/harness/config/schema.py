"""The YAML config, validated with pydantic. Every error names the file, the line and the field.

`load_config(path)` returns a validated `Config` (fields, types, bounds, each backend's options); the planner
(harness/plan/workloads.py) then resolves its workloads to graphs (built-in or parsed from inline expressions),
so everything wrong with a config is found before anything runs or is written.
"""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StrictInt, ValidationError, field_validator, model_validator

from bakeoff.workloads.ir import DTYPES, IRError

from bakeoff.harness.config.backend_options import check_backends
from bakeoff.harness.config.errors import pydantic_error
from bakeoff.harness.config.source import check_size, read_config_file
from bakeoff.harness.config.yaml_lines import ConfigError, LocatedYaml, load_yaml
from bakeoff.harness.config.strict import Strict as _Strict
from bakeoff.harness.config.sweep import SweepConfig
from bakeoff.harness.config.timing import TimingConfig

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
           "default_config_text", "PRESETS", "DTYPES", "IRError"]
