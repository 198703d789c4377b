"""Config -> plan: the matrix workload x shape x dtype x backend, as self-contained cases.

A case carries everything its worker needs (the bound graph as JSON, with how each input is filled, its
backend's parsed options, its typed timing settings, seeds, the paths of input files): a worker never reads the
YAML. Each label's options are parsed once here, into its backend's `Options` model; a case read back from JSON
(the worker's case file, a Ray task) parses them once more, where it is read. Combinations a backend cannot run
are kept as cases with `skip_reason` set; the runner turns them into `skipped` records without starting a
worker.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from bakeoff.backends import Backend, backend_class, get_backend
from bakeoff.backends.options import BackendOptions
from bakeoff.workloads import costs
from bakeoff.workloads.grad import workload_label
from bakeoff.workloads.ir import Graph, bind

from bakeoff.harness.config.schema import Config
from bakeoff.harness.config.timing import TimingConfig
from bakeoff.harness.plan.workloads import ResolvedWorkload
from bakeoff.backends.sweep import SweepSpec


@dataclass(frozen=True)
class CaseSweep:
    """A shape sweep's plan (harness/config/sweep.py): the swept dim, its values in serving order, and the
    unbound graph's JSON (inits applied)."""

    dim: str
    values: tuple[int, ...]
    graph: dict


@dataclass(frozen=True)
class Case:
    """One unit of work: one workload at one shape and dtype, on one backend and device."""

    case_id: str
    workload: str
    preset: str
    shape: str  # "M=64,N=256"
    dims: dict[str, int]
    dtype: str
    label: str  # the backend's label in the config (usually its name; stored as the record's `backend`)
    device: str
    graph: dict  # bound Graph.to_json()
    options: BackendOptions  # an instance of the backend's Options model (a mapping is parsed into it)
    seeds: tuple[int, ...]
    timing: TimingConfig  # (a mapping of settings is validated into it)
    timeout_s: float
    warm_compile: bool
    flops: int
    bytes_moved: int
    memory_limit_gb: float | None = None
    skip_reason: str | None = None
    backend: str = ""  # the registered backend that runs it (= label unless the config says `backend:`)
    input_files: dict[str, str] = dataclasses.field(default_factory=dict)  # SHA-256 -> path (file inits)
    # The training step (forward + backward, workloads/grad.py) instead of the forward alone; flops and
    # bytes_moved are then the step's.
    grad: bool = False
    # A shape sweep: `graph` and `dims` are then its first value's. None: one shape.
    sweep: CaseSweep | None = None

    def __post_init__(self) -> None:
        if not self.backend:
            object.__setattr__(self, "backend", self.label)
        if not isinstance(self.options, BackendOptions):  # read back from JSON, or given as a mapping: parsed once
            object.__setattr__(self, "options", backend_class(self.backend).parse_options(self.options))
        if not isinstance(self.timing, TimingConfig):  # read back from JSON, or given as a mapping
            object.__setattr__(self, "timing", TimingConfig.of(self.timing))
        if isinstance(self.sweep, dict):  # read back from JSON
            object.__setattr__(self, "sweep", CaseSweep(self.sweep["dim"], tuple(self.sweep["values"]),
                                                        self.sweep["graph"]))

    @property
    def workload_label(self) -> str:
        """The workload as ids, records and tables name it: `mlp_block (fwd+bwd)` for a training step."""
        return workload_label(self.workload, self.grad)

    @property
    def options_given(self) -> dict[str, Any]:
        """The options the config wrote for this case's label, as JSON data without the defaults it left out
        (the record's `options`); `options.model_dump(mode="json")` has every option, as the case ran."""
        return self.options.model_dump(mode="json", exclude_unset=True)

    def bound_graph(self) -> Graph:
        return Graph.from_json(self.graph)

    def to_json(self) -> str:
        """The case as JSON (the worker's case file, a Ray task's argument); `from_json` reads it back."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        sweep = dataclasses.asdict(self.sweep) if self.sweep else None
        return json.dumps({**data, "options": self.options_given, "timing": self.timing.model_dump(mode="json"),
                           "sweep": sweep})

    @classmethod
    def from_json(cls, text: str) -> "Case":
        data = json.loads(text)
        data["seeds"] = tuple(data["seeds"])
        return cls(**data)


def shape_label(dims: dict[str, int], sweep: tuple[str, tuple[int, ...]] | None = None) -> str:
    """"M=64,N=256"; a swept dim as `S=sweep[smallest..largest]` (its values in order are the record's
    `sweep_values`, and enter the graph digest)."""
    def value(k: str, v: int) -> str:
        return f"sweep[{min(sweep[1])}..{max(sweep[1])}]" if sweep and k == sweep[0] else str(v)
    return ",".join(f"{k}={value(k, v)}" for k, v in dims.items())


def plan_cases(cfg: Config, workloads: list[ResolvedWorkload], device: str) -> list[Case]:
    """Every case of the config on `device` (already resolved), in a stable order: workload, shape, dtype, backend."""
    adapters = {label: opts.get("backend", label) for label, opts in cfg.backends.items()}
    backends = {label: get_backend(adapter) for label, adapter in adapters.items()}
    parsed = {label: backends[label].parse_options({k: v for k, v in opts.items() if k != "backend"})
              for label, opts in cfg.backends.items()}  # checked at config load, which named any bad line
    unavailable = {name: _available(b) for name, b in backends.items()}
    cases = []
    for w in workloads:
        for label, dims in w.shapes:
            for dtype in w.dtypes:
                graph = bind(w.graph, dims, dtype)
                flops, nbytes = costs.flops(graph, w.grad), costs.step_min_bytes(graph, w.grad)
                for name, backend in backends.items():
                    options = parsed[name]
                    # A backend without a backward, or without this device, says so first: installing it would
                    # not make the case run.
                    kind = device.split(":")[0]
                    reason = (w.grad and _supports_grad(backend, graph, kind, dtype, options)) or \
                        backend.device_refusal(kind) or \
                        unavailable[name] or _supports(backend, graph, kind, dtype, options)
                    sweep = None
                    if w.sweep is not None:
                        sweep = CaseSweep(w.sweep[0], tuple(w.sweep[1]), w.graph.to_json())
                        reason = reason or _supports_sweep(backend, w.graph, dims, w.sweep, dtype, options)
                    shape = shape_label(dims, w.sweep)
                    cases.append(Case(
                        case_id=f"{workload_label(w.name, w.grad)}/{shape}/{dtype}/{name}", workload=w.name,
                        preset=label, shape=shape, grad=w.grad,
                        dims=dims, dtype=dtype, label=name, device=device, graph=graph.to_json(),
                        options=options,
                        backend=adapters[name], seeds=tuple(cfg.seeds), timing=cfg.timing,
                        timeout_s=cfg.timeout_s, warm_compile=cfg.compile.warm and sweep is None, flops=flops,
                        bytes_moved=nbytes, memory_limit_gb=cfg.memory_limit_gb, skip_reason=reason,
                        input_files=dict(w.input_files), sweep=sweep))
    return cases


def _available(backend: Backend) -> str | None:
    """backend.available(); one that raises (a plugin's bug) makes its cases skipped, saying so."""
    try:
        return backend.available()
    except Exception as exc:
        return f"{backend.name}.available() raised {type(exc).__name__}: {str(exc)[:200]}"


def _supports(backend: Backend, graph: Graph, device: str, dtype: str, options: BackendOptions) -> str | None:
    """backend.supports(); one that raises is taken as None, so the case's compile records the failure."""
    try:
        return backend.supports(graph, device, dtype, options)
    except Exception:
        return None


def _supports_grad(backend: Backend, graph: Graph, device: str, dtype: str, options: BackendOptions
                   ) -> str | None:
    """backend.supports_grad(); one that raises is taken as None, as in _supports."""
    try:
        return backend.supports_grad(graph, device, dtype, options)
    except Exception:
        return None


def _supports_sweep(backend: Backend, graph: Graph, dims: dict[str, int], sweep: tuple[str, tuple[int, ...]],
                    dtype: str, options: BackendOptions) -> str | None:
    """backend.sweep_refusal() for the sweep (None: it can serve it); one that raises is taken as None, so the
    case's worker records the failure."""
    try:
        return backend.sweep_refusal(SweepSpec(graph, dims, sweep[0], tuple(sweep[1]), dtype), options)
    except Exception:
        return None
