"""The backend protocol: what every adapter implements, and the values it hands back.

A backend compiles a *bound* workload graph (`workloads.ir.bind`) for one device and returns a `Compiled`.
The harness exchanges tensors with it as torch tensors on the device; an adapter converts them
(DLPack, on the device) in `prepare`, outside any timed region, and back in `to_torch`.

Call order used by the harness::

    compiled = backend.compile(graph, specs, device, options)   # timed as compile time
    prepared = compiled.prepare(inputs)                         # not timed: upload / wrap inputs
    raw = compiled.run(prepared); compiled.sync()               # timed
    outputs = compiled.to_torch(raw)                            # not timed: for the numeric check

Options. A backend declares the options its YAML entry takes as a pydantic model, the class attribute
`Options` (a subclass of `backends.options.BackendOptions`: unknown keys refused, no coercion across types,
finite floats, immutable; every field typed, with a default and a `description`). A backend that declares
none takes none (`NoOptions`: any key is refused). The config loader validates each label's options against
the model, so a typo exits 2 naming the file, the line and the field before anything runs; `bakeoff list
backends --options` prints the models. The planner then parses each label's options once into an instance of
the model, which every case of that label carries (and, crossing into a worker process as JSON, is parsed once
again where the case is read back). Every method below that takes `options` receives that instance, defaults
filled in: an adapter reads `options.mode`, never a mapping. `Backend.parse_options(mapping)` is the parser at
those boundaries (a script or test that calls `compile` directly makes its options with it, or with
`Backend.Options(...)`); given an instance of the model it returns it unchanged, so an adapter that still calls
it on what it receives keeps working.

Adapters from outside this repository. A distribution registers a backend under the entry-point group
`bakeoff.backends`: the entry point's name is the backend's name (lowercase, stable: it is stored in every
record) and its value `module:Class`, a subclass of `Backend` whose `name` is that same name, e.g. in the
plugin's pyproject.toml::

    [project.entry-points."bakeoff.backends"]
    mycc = "mycc_bakeoff.adapter:MyccBackend"

and in mycc_bakeoff/adapter.py, an adapter with one option::

    class MyccOptions(BackendOptions):
        opt_level: int = Field(2, ge=0, le=3, description="mycc -O level")

    class MyccBackend(Backend):
        name = "mycc"
        Options = MyccOptions

        def compile(self, graph, specs, device, options: MyccOptions) -> Compiled:
            import mycc  # the compiler, imported when a case compiles

            return MyccCompiled(mycc.build(graph, opt_level=options.opt_level), ...)

It then appears in `bakeoff list backends` (its origin: the distribution and version) and is named in a
config like a built-in one. The class is imported when first asked for, in the orchestrator (to check the
config's options, plan) and in each worker; a module must import without its compiler (import it inside
methods, and say in `available()` what to install). A plugin that fails to import, is not a Backend
subclass, or takes a name already taken (a built-in, or another plugin) is not used; `list backends` and
`doctor` report why.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, ClassVar, ContextManager, Mapping, Sequence

from pydantic import ValidationError

from bakeoff.backends.compiled import Compiled, CompileInfo, TensorSpec
from bakeoff.backends.options import BackendOptions, NoOptions, OptionsError, errors_text
from bakeoff.backends.sweep_server import PerShapeServer, SweepServer, SweepSpec
from bakeoff.workloads.ir import Graph

__all__ = ["Backend", "Compiled", "CompileInfo", "TensorSpec", "TorchCompiled", "device_waited_s", "device_work",
           "dist_version", "set_device_work", "user_cache_dir"]

# What a compile marks as its device work (Backend.marks_device_work): the worker installs the timing gate's
# (harness/supervise/gate.py device_work: the section holds the gate while the rest of the compile does not).
# `device_waited_s` is the seconds the worker has waited to rejoin it so far (the harness's wait, not the
# compiler's: a backend timing its stages leaves it out).
_device_work: Callable[[bool], ContextManager[Any]] = nullcontext
_device_waited_s: Callable[[], float] = lambda: 0.0


def device_work(alone: bool = False) -> ContextManager[Any]:
    """Wrap the part of a compile that runs work on the device to time it (an autotuner's candidates); `alone`:
    with no other case's work on the device meanwhile (what decides between candidates)."""
    return _device_work(alone)


def device_waited_s() -> float:
    """Seconds this process has waited so far to enter `device_work` (0 outside the harness's gate)."""
    return _device_waited_s()


def set_device_work(hook: Callable[[bool], ContextManager[Any]], waited_s: Callable[[], float] = lambda: 0.0) -> None:
    global _device_work, _device_waited_s
    _device_work, _device_waited_s = hook, waited_s


class Backend(ABC):
    """A compiler adapter. Subclasses declare what they can do as class attributes."""

    name: ClassVar[str]
    devices: ClassVar[frozenset[str]] = frozenset({"cpu", "cuda"})
    dtypes: ClassVar[frozenset[str]] = frozenset({"float32", "float16", "bfloat16"})
    # Environment variables naming cache folders, set per case by the harness for cold/warm compiles.
    cache_env: ClassVar[tuple[str, ...]] = ()
    # Whether `run` launches on torch's current CUDA stream, so CUDA events recorded there time it.
    timed_with_events: ClassVar[bool] = False
    # Whether `run` can be captured in a CUDA graph (torch.cuda.graph) for graph-replay timing.
    graph_capturable: ClassVar[bool] = False
    # Why the process warm-up compile (harness/worker/process_setup.py) runs in the case's own process
    # rather than in a pre-started worker ahead of it (the record's `compile_setup_in_case_reason`).
    warmup_in_case_reason: ClassVar[str] = (
        "a pre-started worker gets ready before its case is dealt (cases come from one queue), so it cannot "
        "know which backend to warm up, and importing a compiler there would send later cases whose "
        "environment that compiler reads to fresh processes")
    # The options a config may give this backend (see the module docstring); none by default.
    Options: ClassVar[type[BackendOptions]] = NoOptions
    # Training steps (`grad: true`, workloads/grad.py): whether `compile_grad` is implemented, and if not, why
    # (the skipped case's reason); whether the step's `run` (forward and backward) can be captured in a CUDA
    # graph, as `graph_capturable` says for the forward.
    grad: ClassVar[bool] = False
    grad_reason: ClassVar[str] = "computes no gradients"
    grad_graph_capturable: ClassVar[bool] = False
    # Whether a compile that times on the device (compile_times_on_device) wraps that timing, and only that,
    # in `device_work()`: the rest of it (e.g. compiling the candidates it will time) is then host work.
    marks_device_work: ClassVar[bool] = False

    @classmethod
    def parse_options(cls, options: Mapping[str, Any] | BackendOptions | None) -> BackendOptions:
        """`options` (a mapping as a config or a case's JSON gives it; None: no options) as this backend's
        typed `Options`, defaults filled in; an instance of the model is returned as is. Raises OptionsError (a
        ValueError) for an unknown key or a bad value; the config loader refuses those first, naming the line."""
        if isinstance(options, cls.Options):
            return options
        try:
            return cls.Options.model_validate(dict(options or {}))
        except ValidationError as exc:
            raise OptionsError(f"{cls.name}: {errors_text(exc)}") from None

    @classmethod
    def available(cls) -> str | None:
        """None when the backend can run here, else the reason (e.g. 'jax not installed (pip install jax)')."""
        return None

    @classmethod
    def install_warning(cls) -> str | None:
        """A problem with the installation that does not stop the backend (doctor shows it), else None."""
        return None

    @classmethod
    def worker_env(cls, device: str) -> dict[str, str]:
        """Environment variables the harness sets in the worker process before anything is imported there."""
        return {}

    @classmethod
    def version(cls) -> str | None:
        """Version string of the underlying compiler, or None if not installed."""
        return None

    def device_refusal(self, device: str) -> str | None:
        """Why this backend cannot run on `device` (a kind: cpu, cuda), None when it can. The planner asks it
        before `available()`: installing a backend would not make it run on a device it lacks."""
        return None if device in self.devices else f"{self.name} does not run on {device}"

    def supports(self, graph: Graph, device: str, dtype: str, options: BackendOptions | None = None) -> str | None:
        """None when this backend can run `graph` on `device` in `dtype` with the case's `options` (an
        instance of `Options`; None: the defaults), else why not (becomes `skipped`). Runs at planning time, in
        the orchestrator: it must not raise (if it does, the planner treats it as None and the case's compile
        records the failure)."""
        if (why := self.device_refusal(device)) is not None:
            return why
        if dtype not in self.dtypes:
            return f"{self.name} does not support {dtype}"
        return None

    @classmethod
    def compile_times_on_device(cls, options: BackendOptions) -> str | None:
        """Why a compile with `options` times work on the device (autotuning: candidate kernels or tactics
        timed while compiling), or None when it is host work and at most a first run of what it built. Under
        the `beside_compiles` timing gate (harness/supervise/gate.py) a compile that returns None runs while other
        cases time; one that returns a reason holds the gate like any device work (all of it, unless the
        backend `marks_device_work`). A backend that says nothing is taken to time on the device."""
        return f"{cls.name} does not declare its compile free of device timing"

    @classmethod
    def graph_compile_times_on_device(cls, graph: Graph, options: BackendOptions, grad: bool = False) -> str | None:
        """`compile_times_on_device` for compiling `graph` (the training step's when `grad`): a backend whose
        autotuner times only some ops (XLA: GEMMs, convolutions, fused attention) says None for a graph
        without them. By default the options decide alone."""
        return cls.compile_times_on_device(options)

    # Why this backend serves a shape sweep with one compile per shape (backends/sweep_server.py), in words.
    sweep_per_shape_reason: ClassVar[str] = "the adapter has no dynamic-shape path"

    def sweep_refusal(self, spec: SweepSpec, options: BackendOptions | None = None) -> str | None:
        """None when this backend can serve the shape sweep `spec` (backends/sweep_server.py: SweepSpec) with the
        case's options (None: the defaults), else why not (the case is `skipped`). Runs at planning time and must
        not raise."""
        return None

    def serve_sweep(self, spec: SweepSpec, device: str, options: BackendOptions) -> SweepServer:
        """The SweepServer (backends/sweep_server.py) that serves `spec`'s shapes; by default one compile per
        shape, for `sweep_per_shape_reason`."""
        return PerShapeServer(self, device, options, self.sweep_per_shape_reason)

    @abstractmethod
    def compile(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: BackendOptions) -> Compiled:
        """Compile `graph` (bound) for inputs `specs` on `device` with the case's `options` (an instance of
        `Options`, parsed when the case was planned). Raise on failure; the harness records it."""

    def supports_grad(self, graph: Graph, device: str, dtype: str, options: BackendOptions | None = None
                      ) -> str | None:
        """None when this backend can compile `graph`'s training step, else why not (the case is skipped).
        Runs at planning time and must not raise; by default the class attributes `grad` and `grad_reason`."""
        return None if self.grad else f"{self.name} {self.grad_reason}"

    def compile_grad(self, graph: Graph, specs: Sequence[TensorSpec], device: str,
                     options: BackendOptions) -> Compiled:
        """Compile the training step of `graph` (workloads/grad.py): its executable takes the graph's inputs
        (`specs`) then one cotangent per output, and returns the outputs then the gradient of each of
        `grad_inputs(graph)`. Backends with `grad = True` implement it."""
        raise NotImplementedError(f"{self.name} {self.grad_reason}")

    def compile_case(self, graph: Graph, specs: Sequence[TensorSpec], device: str, options: BackendOptions,
                     grad: bool = False) -> Compiled:
        """`compile_grad` for a training step, else `compile`. `options` must be an instance of `Options`."""
        if not isinstance(options, self.Options):
            raise TypeError(f"{self.name} compiles with an instance of {self.Options.__name__}, not "
                            f"{type(options).__name__}: parse a mapping with {type(self).__name__}.parse_options")
        if grad:
            return self.compile_grad(graph, specs, device, options)
        return self.compile(graph, specs, device, options)


def user_cache_dir() -> Path:
    """$XDG_CACHE_HOME/bakeoff, else ~/.cache/bakeoff: where the backends keep, across runs, what they learned
    about this machine (probe answers)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bakeoff"


def dist_version(dist: str) -> str | None:
    """Installed version of the distribution `dist`, read from its metadata (nothing is imported)."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


class TorchCompiled(Compiled):
    """A Compiled whose `run` is a Python callable on torch tensors (eager, Inductor, ...)."""

    def __init__(self, fn: Any, device: str, info: CompileInfo | None = None,
                 artifacts: dict[str, Any] | None = None) -> None:
        self.fn = fn
        self.device = device
        self.info = info or CompileInfo()
        self._artifacts = artifacts

    def run(self, prepared: Any) -> Any:
        return self.fn(*prepared)

    def to_torch(self, raw: Any) -> list[Any]:
        return list(raw)

    def sync(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()

    def artifacts(self) -> dict[str, Any] | None:
        return self._artifacts
